// Shape rules are small patterns: "[..., hidden_size]" binds the trailing dim
// to the symbol hidden_size (shared across inputs, so weight "[hidden_size]"
// must agree); "[rows, 2*d]" binds d from an even dim; "[...]" is any shape.
// Output shapes are patterns over the same symbols, or a function
// (kerneld/output_rule.h). Matching and evaluation: kerneld/check.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kerneld/tensor.h"

namespace kerneld {

// One dim of a pattern: "...", a constant, or coeff * symbol.
struct DimPattern {
  enum class Kind { kEllipsis, kConst, kSymbol } kind = Kind::kConst;
  int64_t value = 0;  // constant, or coefficient of the symbol
  std::string symbol;
};

struct ShapePattern {
  std::string text;  // as written, for docs and messages
  std::vector<DimPattern> dims;
  bool any = false;  // "" or "[...]" alone: anything goes

  // Parses "[..., 2*d]"; aborts on a malformed pattern (a programming error
  // caught by the registry test, never by a client).
  static ShapePattern Parse(const std::string& text);
};

// Symbol bindings collected while matching inputs; "..." binds the prefix.
struct ShapeBindings {
  std::map<std::string, int64_t, std::less<>> symbols;
  std::optional<Shape> ellipsis;
};

}  // namespace kerneld
