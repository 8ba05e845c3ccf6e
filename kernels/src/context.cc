// The kernel context's accessors by name.
#include "kerneld/context.h"

#include "kerneld/schema.h"

namespace kerneld {

const TensorView& KernelContext::input(std::string_view n) const {
  return inputs.at(static_cast<size_t>(op->InputIndex(n)));
}
TensorView& KernelContext::output(std::string_view n) {
  return outputs.at(static_cast<size_t>(op->OutputIndex(n)));
}
double KernelContext::attr_f(std::string_view n) const {
  const AttrValue& v = attrs.find(n)->second;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
int64_t KernelContext::attr_i(std::string_view n) const {
  return std::get<int64_t>(attrs.find(n)->second);
}
bool KernelContext::attr_b(std::string_view n) const {
  return std::get<bool>(attrs.find(n)->second);
}
const std::string& KernelContext::attr_s(std::string_view n) const {
  return std::get<std::string>(attrs.find(n)->second);
}

}  // namespace kerneld
