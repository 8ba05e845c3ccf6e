#include "tensor_util.h"

#include <cstring>
#include <string>

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

// Strict: every dim a whole non-negative number, no empty item ("16x" and
// "16,,4" used to send [16] and [16, 4]). "[]" is a scalar.
bool ParseShape(const std::string& s, std::vector<int64_t>* shape) {
  shape->clear();
  std::string t;
  for (char c : s)
    if (c != ' ') t += c;
  const bool bracketed = t.size() >= 2 && t.front() == '[' && t.back() == ']';
  if (bracketed) t = t.substr(1, t.size() - 2);
  if (t.empty()) return bracketed;
  if (t.find_first_of("[]") != std::string::npos) return false;
  size_t at = 0;
  while (true) {
    const size_t sep = t.find_first_of("x,", at);
    const std::string tok = t.substr(at, sep == std::string::npos ? std::string::npos : sep - at);
    if (tok.empty() || tok.size() > 18 || tok.find_first_not_of("0123456789") != std::string::npos)
      return false;
    shape->push_back(std::stoll(tok));
    if (sep == std::string::npos) return true;
    at = sep + 1;
  }
}

}  // namespace kerneld::client
