#include "tensor_util.h"

#include <cstring>
#include <sstream>


namespace kerneld::client {

void ToProto(const HostTensor& t, v1::Tensor* out) {
  out->set_dtype(static_cast<v1::DType>(static_cast<int>(t.dtype)));
  out->clear_shape();
  for (int64_t d : t.shape) out->add_shape(d);
  out->set_inline_data(Encode(t.dtype, t.values));
}

bool FromProto(const v1::Tensor& t, HostTensor* out) {
  out->dtype = static_cast<DType>(t.dtype());
  out->shape.assign(t.shape().begin(), t.shape().end());
  if (!Decode(out->dtype, t.inline_data(), &out->values)) return false;
  return static_cast<int64_t>(out->values.size()) == Numel(out->shape);
}

bool ParseShape(const std::string& s, std::vector<int64_t>* shape) {
  shape->clear();
  std::string t;
  for (char c : s)
    if (c != '[' && c != ']' && c != ' ') t += (c == 'x' || c == ',') ? ' ' : c;
  std::istringstream is(t);
  std::string tok;
  while (is >> tok) {
    char* end = nullptr;
    long long v = std::strtoll(tok.c_str(), &end, 10);
    if (*end != '\0' || v < 0) return false;
    shape->push_back(v);
  }
  return true;
}

}  // namespace kerneld::client
