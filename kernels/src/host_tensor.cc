// Host tensors: random values, rounding, little-endian bytes.
#include "kerneld/host_tensor.h"

#include <cstring>

#include "kerneld/half.h"

namespace kerneld {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double RoundTo(DType dt, double v) {
  switch (dt) {
    case DType::kFloat16:
      return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DType::kBFloat16:
      return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    case DType::kFloat32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

namespace {
template <typename T>
void Put(std::string* s, size_t i, T v) {
  std::memcpy(s->data() + i * sizeof(T), &v, sizeof(T));
}
template <typename T>
T Get(const std::string& s, size_t i) {
  T v;
  std::memcpy(&v, s.data() + i * sizeof(T), sizeof(T));
  return v;
}
}  // namespace

HostTensor Random(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo,
                  double hi) {
  HostTensor t;
  t.dtype = dt;
  t.shape = std::move(shape);
  const int64_t n = Numel(t.shape);
  t.values.resize(static_cast<size_t>(n));
  if (IsFloating(dt)) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (auto& v : t.values) v = RoundTo(dt, u(rng));
  } else {
    std::uniform_int_distribution<int64_t> u(static_cast<int64_t>(lo),
                                             static_cast<int64_t>(hi) - 1);
    for (auto& v : t.values) v = static_cast<double>(dt == DType::kBool ? u(rng) & 1 : u(rng));
  }
  return t;
}

std::string Encode(DType dt, const std::vector<double>& values) {
  std::string s(values.size() * ItemSize(dt), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    switch (dt) {
      case DType::kFloat16:
        Put<uint16_t>(&s, i, FloatToHalf(static_cast<float>(v)));
        break;
      case DType::kBFloat16:
        Put<uint16_t>(&s, i, FloatToBFloat16(static_cast<float>(v)));
        break;
      case DType::kFloat32:
        Put<float>(&s, i, static_cast<float>(v));
        break;
      case DType::kFloat64:
        Put<double>(&s, i, v);
        break;
      case DType::kInt8:
        Put<int8_t>(&s, i, static_cast<int8_t>(v));
        break;
      case DType::kInt16:
        Put<int16_t>(&s, i, static_cast<int16_t>(v));
        break;
      case DType::kInt32:
        Put<int32_t>(&s, i, static_cast<int32_t>(v));
        break;
      case DType::kInt64:
        Put<int64_t>(&s, i, static_cast<int64_t>(v));
        break;
      case DType::kUInt8:
        Put<uint8_t>(&s, i, static_cast<uint8_t>(v));
        break;
      case DType::kBool:
        Put<uint8_t>(&s, i, v != 0 ? 1 : 0);
        break;
      case DType::kInvalid:
        break;
    }
  }
  return s;
}

bool Decode(DType dt, const std::string& bytes, std::vector<double>* values) {
  size_t item = ItemSize(dt);
  if (item == 0 || bytes.size() % item != 0) return false;
  size_t n = bytes.size() / item;
  values->resize(n);
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (dt) {
      case DType::kFloat16:
        v = HalfToFloat(Get<uint16_t>(bytes, i));
        break;
      case DType::kBFloat16:
        v = BFloat16ToFloat(Get<uint16_t>(bytes, i));
        break;
      case DType::kFloat32:
        v = Get<float>(bytes, i);
        break;
      case DType::kFloat64:
        v = Get<double>(bytes, i);
        break;
      case DType::kInt8:
        v = Get<int8_t>(bytes, i);
        break;
      case DType::kInt16:
        v = Get<int16_t>(bytes, i);
        break;
      case DType::kInt32:
        v = Get<int32_t>(bytes, i);
        break;
      case DType::kInt64:
        v = static_cast<double>(Get<int64_t>(bytes, i));
        break;
      case DType::kUInt8:
      case DType::kBool:
        v = Get<uint8_t>(bytes, i);
        break;
      case DType::kInvalid:
        return false;
    }
    (*values)[i] = v;
  }
  return true;
}

}  // namespace kerneld
