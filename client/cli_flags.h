// kernelctl's command line (CLI11): the validators its options share, so a
// bad value is refused with one message that names the option and what it
// wants, and the help formatter that shows each option by its one spelling.
//
// Flag style: words joined by hyphens (--tls-ca, --request-rate). Every
// option also answers to its underscore spelling (--tls_ca, --request_rate):
// scripts written against either keep working. Names() registers both.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace kerneld::client {

// "--request-rate" -> "--request-rate,--request_rate" (and "-h,--help"
// style lists likewise), for CLI::App::add_option.
std::string Names(const std::string& canonical);

// Shows an option by its first long name only; the aliases stay out of the
// help (docs/api.md mentions them once).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
};

// Strict numbers: the whole text, in range. CLI11's own checks accept
// "abc" into a message about floating-point ranges.
CLI::Validator IntAtLeast(int64_t min);  // "N: an integer >= min"
CLI::Validator NumberAtLeast(double min, bool inclusive);
// "1,4,16": positive numbers (integers when `integers`), comma-separated.
CLI::Validator PositiveList(bool integers);
// A shape as ParseShape reads it ("4096", "16x4096", "[16, 4096]").
CLI::Validator ShapeText();
// A dtype name kerneld knows (float16, bfloat16, float32, int32, ...).
CLI::Validator DTypeText();

}  // namespace kerneld::client
