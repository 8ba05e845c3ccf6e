// A user kernel's launch rule: grid, block and dynamic shared memory from
// the request's shape symbols and int attrs, as a client writes it in
// RegisterKernel ("grid = ceil(n / 256), block = 256"). Parsed once at
// registration (every symbol must be known then), evaluated per request in
// checked int64 arithmetic; the results are bounded before any launch.
//
//   rule  := item (',' item)*            item := ("grid" | "block" | "shared") '=' value
//   value := expr | '(' expr (',' expr){1,2} ')'
//   expr  := integers, symbols, + - * / % (floor division), parentheses,
//            ceil(a / b) (division rounded up), min(a, b), max(a, b)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kerneld/status.h"

namespace kerneld::server::sandbox {

// Bounds on what a client may write and on what a launch may ask.
inline constexpr size_t kMaxRuleBytes = 512;
inline constexpr size_t kMaxRuleNodes = 256;
inline constexpr int kMaxRuleDepth = 16;
inline constexpr int64_t kMaxBlockThreads = 1024;
inline constexpr int64_t kMaxGridBlocks = int64_t{1} << 24;  // all dims together
inline constexpr int64_t kMaxSharedBytes = 48 * 1024;        // dynamic, without an opt-in

struct LaunchDims {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  int64_t shared_bytes = 0;
  bool empty() const { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }
};

class LaunchRule {
 public:
  // Parses `text`; every symbol it names must be in `known`. INVALID_ARGUMENT
  // with the position and what was expected otherwise. "grid" and "block"
  // are required; "shared" defaults to 0.
  static Status Parse(const std::string& text, const std::set<std::string>& known, LaunchRule* out);

  // Evaluates with the symbols' values; INVALID_ARGUMENT on overflow,
  // division by zero, or dims out of bounds (a block of 1..1024 threads, a
  // grid of at most kMaxGridBlocks blocks, shared <= kMaxSharedBytes).
  Status Eval(const std::function<bool(const std::string&, int64_t*)>& lookup,
              LaunchDims* out) const;

  const std::string& text() const { return text_; }

 private:
  struct Node {
    enum Kind { kNum, kSym, kAdd, kSub, kMul, kDiv, kMod, kNeg, kCeilDiv, kMin, kMax } kind;
    int64_t value = 0;
    std::string symbol;
    int a = -1, b = -1;  // operands (node indices)
  };
  friend class RuleParser;
  Status EvalNode(int n, const std::function<bool(const std::string&, int64_t*)>& lookup,
                  int64_t* out) const;

  std::string text_;
  std::vector<Node> nodes_;
  // grid, block, shared: up to three expressions each (-1: absent, 1).
  int grid_[3] = {-1, -1, -1}, block_[3] = {-1, -1, -1}, shared_ = -1;
};

}  // namespace kerneld::server::sandbox
