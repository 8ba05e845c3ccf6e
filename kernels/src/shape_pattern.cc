// Parsing shape patterns ("[..., 2*d]"); matching: check.cc.
#include "kerneld/shape_pattern.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace kerneld {

namespace {
[[noreturn]] void BadPattern(const std::string& text, const char* why) {
  std::fprintf(stderr, "kerneld: bad shape pattern '%s': %s\n", text.c_str(), why);
  std::abort();
}
std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
}  // namespace

ShapePattern ShapePattern::Parse(const std::string& text) {
  ShapePattern p;
  p.text = text;
  std::string t = Trim(text);
  if (t.empty() || t == "[...]") {
    p.any = true;
    return p;
  }
  if (t.front() != '[' || t.back() != ']') BadPattern(text, "expected [...]");
  std::string body = t.substr(1, t.size() - 2);
  if (Trim(body).empty()) return p;  // "[]": a scalar
  std::stringstream ss(body);
  std::string item;
  bool seen_ellipsis = false;
  while (std::getline(ss, item, ',')) {
    item = Trim(item);
    DimPattern d;
    if (item == "...") {
      if (seen_ellipsis) BadPattern(text, "two ellipses");
      seen_ellipsis = true;
      d.kind = DimPattern::Kind::kEllipsis;
    } else if (!item.empty() && std::isdigit(static_cast<unsigned char>(item[0])) &&
               item.find('*') == std::string::npos) {
      d.kind = DimPattern::Kind::kConst;
      d.value = std::stoll(item);
    } else {
      d.kind = DimPattern::Kind::kSymbol;
      d.value = 1;
      auto star = item.find('*');
      std::string sym = item;
      if (star != std::string::npos) {
        d.value = std::stoll(item.substr(0, star));
        sym = Trim(item.substr(star + 1));
        if (d.value <= 0) BadPattern(text, "coefficient must be positive");
      }
      if (sym.empty() || !(std::isalpha(static_cast<unsigned char>(sym[0])) || sym[0] == '_'))
        BadPattern(text, "bad symbol");
      d.symbol = sym;
    }
    p.dims.push_back(d);
  }
  return p;
}

}  // namespace kerneld
