// An op's attributes: the scalar parameters a request passes beside its
// tensors (scale's factor, rmsnorm's eps), their types and defaults.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace kerneld {

enum class AttrType { kFloat, kInt, kBool, kString };
std::string_view AttrTypeName(AttrType t);

using AttrValue = std::variant<double, int64_t, bool, std::string>;
using AttrMap = std::map<std::string, AttrValue, std::less<>>;
std::string AttrValueToString(const AttrValue& v);

struct AttrDef {
  std::string name;
  AttrType type = AttrType::kFloat;
  std::optional<AttrValue> default_value;  // none: the attr is required
  std::string doc;
};

}  // namespace kerneld
