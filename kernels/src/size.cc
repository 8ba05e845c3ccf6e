#include "kerneld/size.h"

#include <cstdio>
#include <string>

namespace kerneld {

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> CheckedNumel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    auto next = CheckedMul(n, d);
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

std::optional<int64_t> CheckedBytes(const Shape& shape, DType dtype) {
  auto n = CheckedNumel(shape);
  if (!n) return std::nullopt;
  return CheckedMul(*n, static_cast<int64_t>(ItemSize(dtype)));
}

std::optional<uint64_t> CheckedRangeEnd(uint64_t offset, uint64_t nbytes, uint64_t limit) {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, nbytes, &end) || end > limit) return std::nullopt;
  return end;
}

Status CheckTensorSize(std::string_view what, DType dtype, const Shape& shape, int64_t* nbytes) {
  if (static_cast<int64_t>(shape.size()) > kMaxRank)
    return InvalidArgument(std::string(what) + " has rank " + std::to_string(shape.size()) +
                           "; at most " + std::to_string(kMaxRank) + " dims are supported");
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      return InvalidArgument(std::string(what) + ": shape " + ShapeToString(shape) +
                             " has a negative dimension (dim " + std::to_string(i) + " = " +
                             std::to_string(shape[i]) + ")");
  auto bytes = CheckedBytes(shape, dtype);
  if (!bytes || *bytes > kMaxTensorBytes)
    return InvalidArgument(std::string(what) + ": " + std::string(DTypeName(dtype)) + " " +
                           ShapeToString(shape) + " is larger than any tensor kerneld accepts (" +
                           HumanBytes(kMaxTensorBytes) + "); check the shape");
  if (nbytes) *nbytes = *bytes;
  return Status::Ok();
}

std::string HumanBytes(int64_t n) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return std::to_string(n) + (n == 1 ? " byte" : " bytes");
  double v = static_cast<double>(n);
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g %s", v, kUnits[u]);
  return buf;
}

}  // namespace kerneld
