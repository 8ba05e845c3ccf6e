#include "sandbox/launch_rule.h"

#include <cctype>

namespace kerneld::server::sandbox {

// Recursive descent over the rule's text; nodes go into the rule's table.
class RuleParser {
 public:
  RuleParser(const std::string& text, const std::set<std::string>& known, LaunchRule* rule)
      : s_(text), known_(known), r_(rule) {}

  Status Rule() {
    bool seen[3] = {false, false, false};
    do {
      std::string key;
      KERNELD_RETURN_IF_ERROR(Ident(&key));
      int which = key == "grid" ? 0 : key == "block" ? 1 : key == "shared" ? 2 : -1;
      if (which < 0) return Error("expected grid, block or shared, got " + Quote(key));
      if (seen[which]) return Error(key + " given twice");
      seen[which] = true;
      if (!Eat('=')) return Error("expected '=' after " + key);
      if (which == 2) {
        KERNELD_RETURN_IF_ERROR(Expr(0, &r_->shared_));
      } else {
        KERNELD_RETURN_IF_ERROR(Value(which == 0 ? r_->grid_ : r_->block_));
      }
    } while (Eat(','));
    Skip();
    if (pos_ != s_.size()) return Error("unexpected " + Quote(s_.substr(pos_, 8)));
    if (!seen[0] || !seen[1]) return Error("needs both grid and block");
    return Status::Ok();
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Peek(char c) {
    Skip();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  Status Error(const std::string& what) const {
    return InvalidArgument("launch rule " + Quote(s_) + ": at byte " + std::to_string(pos_) + ": " +
                           what);
  }
  Status Ident(std::string* out) {
    Skip();
    size_t b = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    if (b == pos_ || std::isdigit(static_cast<unsigned char>(s_[b])))
      return Error("expected a name");
    *out = s_.substr(b, pos_ - b);
    return Status::Ok();
  }
  Status Add(LaunchRule::Node n, int* out) {
    if (r_->nodes_.size() >= kMaxRuleNodes)
      return Error("more than " + std::to_string(kMaxRuleNodes) + " terms");
    r_->nodes_.push_back(std::move(n));
    *out = static_cast<int>(r_->nodes_.size()) - 1;
    return Status::Ok();
  }
  // A tuple "(a, b[, c])" or one expression.
  Status Value(int* dims) {
    const size_t at = pos_, nodes = r_->nodes_.size();
    if (Eat('(')) {
      int first = -1;
      KERNELD_RETURN_IF_ERROR(Expr(1, &first));
      if (Eat(',')) {
        dims[0] = first;
        int n = 1;
        do {
          if (n == 3) return Error("at most 3 dimensions");
          KERNELD_RETURN_IF_ERROR(Expr(1, &dims[n++]));
        } while (Eat(','));
        if (!Eat(')')) return Error("expected ')' closing the dimensions");
        return Status::Ok();
      }
      pos_ = at;  // a parenthesized expression: parse it again as one
      r_->nodes_.resize(nodes);
    }
    return Expr(0, &dims[0]);
  }
  Status Expr(int depth, int* out) {
    if (depth > kMaxRuleDepth) return Error("nested too deeply");
    KERNELD_RETURN_IF_ERROR(Term(depth, out));
    while (Peek('+') || Peek('-')) {
      const auto kind = s_[pos_++] == '+' ? LaunchRule::Node::kAdd : LaunchRule::Node::kSub;
      int rhs = -1;
      KERNELD_RETURN_IF_ERROR(Term(depth, &rhs));
      KERNELD_RETURN_IF_ERROR(Add({kind, 0, "", *out, rhs}, out));
    }
    return Status::Ok();
  }
  Status Term(int depth, int* out) {
    KERNELD_RETURN_IF_ERROR(Unary(depth, out));
    while (Peek('*') || Peek('/') || Peek('%')) {
      const char op = s_[pos_++];
      const auto kind = op == '*'   ? LaunchRule::Node::kMul
                        : op == '/' ? LaunchRule::Node::kDiv
                                    : LaunchRule::Node::kMod;
      int rhs = -1;
      KERNELD_RETURN_IF_ERROR(Unary(depth, &rhs));
      KERNELD_RETURN_IF_ERROR(Add({kind, 0, "", *out, rhs}, out));
    }
    return Status::Ok();
  }
  Status Unary(int depth, int* out) {
    if (Eat('-')) {
      int a = -1;
      KERNELD_RETURN_IF_ERROR(Unary(depth + 1, &a));
      return Add({LaunchRule::Node::kNeg, 0, "", a, -1}, out);
    }
    return Primary(depth, out);
  }
  Status Primary(int depth, int* out) {
    Skip();
    if (pos_ >= s_.size()) return Error("expected a number, a name or '('");
    if (Eat('(')) {
      KERNELD_RETURN_IF_ERROR(Expr(depth + 1, out));
      if (!Eat(')')) return Error("expected ')'");
      return Status::Ok();
    }
    if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        v = v * 10 + (s_[pos_++] - '0');
        if (v > (int64_t{1} << 40)) return Error("number too large");
      }
      return Add({LaunchRule::Node::kNum, v, "", -1, -1}, out);
    }
    std::string name;
    KERNELD_RETURN_IF_ERROR(Ident(&name));
    if (Eat('(')) {
      if (name != "ceil" && name != "min" && name != "max")
        return Error("unknown function " + Quote(name) + " (ceil, min, max)");
      int a = -1, b = -1;
      KERNELD_RETURN_IF_ERROR(Expr(depth + 1, &a));
      if (name == "ceil") {
        if (!Eat(')')) return Error("expected ')' closing ceil");
        // ceil(a / b): the division rounded up; of anything else, itself.
        const LaunchRule::Node& n = r_->nodes_[static_cast<size_t>(a)];
        if (n.kind != LaunchRule::Node::kDiv) {
          *out = a;
          return Status::Ok();
        }
        return Add({LaunchRule::Node::kCeilDiv, 0, "", n.a, n.b}, out);
      }
      if (!Eat(',')) return Error(name + " takes two arguments");
      KERNELD_RETURN_IF_ERROR(Expr(depth + 1, &b));
      if (!Eat(')')) return Error("expected ')' closing " + name);
      return Add({name == "min" ? LaunchRule::Node::kMin : LaunchRule::Node::kMax, 0, "", a, b},
                 out);
    }
    if (!known_.count(name))
      return Error("unknown symbol " + Quote(name) +
                   " (a launch rule names the inputs' shape symbols and int attrs)");
    return Add({LaunchRule::Node::kSym, 0, name, -1, -1}, out);
  }

  const std::string& s_;
  const std::set<std::string>& known_;
  LaunchRule* r_;
  size_t pos_ = 0;
};

Status LaunchRule::Parse(const std::string& text, const std::set<std::string>& known,
                         LaunchRule* out) {
  *out = LaunchRule();
  if (text.size() > kMaxRuleBytes)
    return InvalidArgument("launch rule of " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(kMaxRuleBytes));
  out->text_ = text;
  RuleParser p(out->text_, known, out);
  return p.Rule();
}

Status LaunchRule::EvalNode(int n, const std::function<bool(const std::string&, int64_t*)>& lookup,
                            int64_t* out) const {
  const Node& node = nodes_[static_cast<size_t>(n)];
  if (node.kind == Node::kNum) {
    *out = node.value;
    return Status::Ok();
  }
  if (node.kind == Node::kSym) {
    if (!lookup(node.symbol, out))
      return InvalidArgument("launch rule: symbol " + Quote(node.symbol) + " has no value");
    return Status::Ok();
  }
  int64_t a = 0, b = 0;
  KERNELD_RETURN_IF_ERROR(EvalNode(node.a, lookup, &a));
  if (node.kind == Node::kNeg) {
    if (a == INT64_MIN) return InvalidArgument("launch rule " + Quote(text_) + ": overflow");
    *out = -a;
    return Status::Ok();
  }
  KERNELD_RETURN_IF_ERROR(EvalNode(node.b, lookup, &b));
  bool overflow = false;
  switch (node.kind) {
    case Node::kAdd:
      overflow = __builtin_add_overflow(a, b, out);
      break;
    case Node::kSub:
      overflow = __builtin_sub_overflow(a, b, out);
      break;
    case Node::kMul:
      overflow = __builtin_mul_overflow(a, b, out);
      break;
    case Node::kDiv:
    case Node::kMod:
    case Node::kCeilDiv: {
      if (b == 0) return InvalidArgument("launch rule " + Quote(text_) + ": division by zero");
      if (a == INT64_MIN && b == -1)
        return InvalidArgument("launch rule " + Quote(text_) + ": overflow");
      int64_t q = a / b, r = a % b;
      if (node.kind == Node::kMod) {
        *out = r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
        break;
      }
      if (r != 0 && ((r < 0) != (b < 0))) --q;         // floor
      if (node.kind == Node::kCeilDiv && r != 0) ++q;  // the floor, plus one
      *out = q;
      break;
    }
    case Node::kMin:
      *out = a < b ? a : b;
      break;
    case Node::kMax:
      *out = a > b ? a : b;
      break;
    default:
      return Internal("launch rule: bad node");
  }
  if (overflow) return InvalidArgument("launch rule " + Quote(text_) + ": overflow");
  return Status::Ok();
}

Status LaunchRule::Eval(const std::function<bool(const std::string&, int64_t*)>& lookup,
                        LaunchDims* out) const {
  *out = LaunchDims();
  for (int i = 0; i < 3; ++i) {
    if (grid_[i] >= 0) KERNELD_RETURN_IF_ERROR(EvalNode(grid_[i], lookup, &out->grid[i]));
    if (block_[i] >= 0) KERNELD_RETURN_IF_ERROR(EvalNode(block_[i], lookup, &out->block[i]));
  }
  if (shared_ >= 0) KERNELD_RETURN_IF_ERROR(EvalNode(shared_, lookup, &out->shared_bytes));
  auto dims = [](const int64_t* d) {
    return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
           ")";
  };
  int64_t threads = 1, blocks = 1;
  for (int i = 0; i < 3; ++i) {
    if (out->block[i] < 1 || out->block[i] > kMaxBlockThreads)
      return InvalidArgument("launch rule gives block " + dims(out->block) +
                             "; each dimension must be 1..1024");
    threads *= out->block[i];
    if (out->grid[i] < 0 || out->grid[i] > kMaxGridBlocks)
      return InvalidArgument("launch rule gives grid " + dims(out->grid) +
                             "; each dimension must be 0.." + std::to_string(kMaxGridBlocks));
    blocks *= out->grid[i];  // each factor <= 2^24: no overflow before the check below
    if (blocks > kMaxGridBlocks)
      return InvalidArgument("launch rule gives grid " + dims(out->grid) + ", more than " +
                             std::to_string(kMaxGridBlocks) + " blocks");
  }
  if (threads > kMaxBlockThreads)
    return InvalidArgument("launch rule gives block " + dims(out->block) + ", " +
                           std::to_string(threads) + " threads; at most 1024");
  if (out->block[2] > 64)
    return InvalidArgument("launch rule gives block " + dims(out->block) + "; z is at most 64");
  if (out->shared_bytes < 0 || out->shared_bytes > kMaxSharedBytes)
    return InvalidArgument("launch rule gives shared = " + std::to_string(out->shared_bytes) +
                           " bytes; at most " + std::to_string(kMaxSharedBytes));
  return Status::Ok();
}

}  // namespace kerneld::server::sandbox
