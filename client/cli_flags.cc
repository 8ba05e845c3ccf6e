#include "cli_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "kerneld/dtype.h"
#include "tensor_util.h"

namespace kerneld::client {

std::string Names(const std::string& canonical) {
  std::string out = canonical;
  std::string alias = canonical;
  bool differs = false;
  for (size_t i = 2; i < alias.size(); ++i)
    if (alias[i] == '-') alias[i] = '_', differs = true;
  if (differs && canonical.rfind("--", 0) == 0) out += "," + alias;
  return out;
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  if (is_positional) return opt->get_name(true, false);
  std::string out;
  for (const auto& s : opt->get_snames()) out += "-" + s + ",";
  const auto& l = opt->get_lnames();
  if (!l.empty()) out += "--" + l.front();
  if (!out.empty() && out.back() == ',') out.pop_back();
  return out;
}

namespace {

bool WholeInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *v = x;
  return true;
}

bool WholeNumber(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(x)) return false;
  *v = x;
  return true;
}

}  // namespace

CLI::Validator IntAtLeast(int64_t min) {
  const std::string want = min == 1   ? "a positive integer"
                           : min == 0 ? "a non-negative integer"
                                      : "an integer >= " + std::to_string(min);
  return CLI::Validator(
      [min, want](std::string& s) -> std::string {
        int64_t v = 0;
        if (!WholeInt(s, &v) || v < min) return "expected " + want + ", got '" + s + "'";
        return "";
      },
      "");
}

CLI::Validator NumberAtLeast(double min, bool inclusive) {
  std::ostringstream want;
  want << "a number " << (inclusive ? ">= " : "> ") << min;
  return CLI::Validator(
      [min, inclusive, w = want.str()](std::string& s) -> std::string {
        double v = 0;
        if (!WholeNumber(s, &v) || (inclusive ? v < min : v <= min))
          return "expected " + w + ", got '" + s + "'";
        return "";
      },
      "");
}

CLI::Validator PositiveList(bool integers) {
  const std::string want = integers ? "positive integers" : "positive numbers";
  return CLI::Validator(
      [integers, want](std::string& s) -> std::string {
        std::stringstream ss(s);
        int n = 0;
        for (std::string item; std::getline(ss, item, ',');) {
          double v = 0;
          int64_t i = 0;
          const bool ok = integers ? WholeInt(item, &i) && i > 0 : WholeNumber(item, &v) && v > 0;
          if (!ok) return "expected " + want + " separated by commas (1,4,16), got '" + s + "'";
          ++n;
        }
        if (n == 0 || s.back() == ',')
          return "expected " + want + " separated by commas (1,4,16), got '" + s + "'";
        return "";
      },
      "");
}

CLI::Validator ShapeText() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::vector<int64_t> shape;
        if (!ParseShape(s, &shape))
          return "expected non-negative dims such as 4096, 16x4096 or [16, 4096], got '" + s + "'";
        return "";
      },
      "");
}

CLI::Validator DTypeText() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (!kerneld::ParseDType(s))
          return "unknown dtype '" + s + "' (float16, bfloat16, float32, float64, int32, ...)";
        return "";
      },
      "");
}

}  // namespace kerneld::client
