// Attribute types and values as requests and docs spell them.
#include "kerneld/attr.h"

#include <sstream>

namespace kerneld {

std::string_view AttrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kFloat:
      return "float";
    case AttrType::kInt:
      return "int";
    case AttrType::kBool:
      return "bool";
    case AttrType::kString:
      return "string";
  }
  return "?";
}

std::string AttrValueToString(const AttrValue& v) {
  if (auto* d = std::get_if<double>(&v)) {
    std::ostringstream os;
    os << *d;
    return os.str();
  }
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return "\"" + std::get<std::string>(v) + "\"";
}

}  // namespace kerneld
