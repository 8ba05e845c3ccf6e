#include "input_gen.h"

#include <algorithm>
#include <regex>
#include <sstream>

#include "kerneld/check.h"
#include "kerneld/input_gen.h"
#include "kerneld/op.h"

namespace kerneld::client {

namespace {

// A shape rule from the server that is safe to parse: items are "...", a
// constant, or [k*]symbol ("[..., 2*d]"). Anything else is left to --shape
// (ShapePattern::Parse aborts on a malformed pattern: a bug in this
// library's own schemas, but a remote daemon's text is input).
bool SimplePattern(const std::string& text) {
  static const std::regex kItem(R"(\s*(\.\.\.|\d{1,9}|(\d{1,9}\s*\*\s*)?[A-Za-z_]\w{0,63})\s*)");
  if (text.size() < 2 || text.size() > 512 || text.front() != '[' || text.back() != ']')
    return false;
  std::stringstream ss(text.substr(1, text.size() - 2));
  std::string item;
  int ellipses = 0;
  while (std::getline(ss, item, ',')) {
    if (!std::regex_match(item, kItem)) return false;
    if (item.find("...") != std::string::npos) ++ellipses;
  }
  return ellipses <= 1;
}

bool Accepts(const v1::TensorSpec& in, DType dt) {
  for (int d : in.dtypes())
    if (d == static_cast<int>(dt)) return true;
  return in.dtypes_size() == 0;
}

std::string DTypeList(const v1::TensorSpec& in) {
  std::string out;
  for (int j = 0; j < in.dtypes_size(); ++j)
    out += (j ? ", " : "") + std::string(DTypeName(static_cast<DType>(in.dtypes(j))));
  return out;
}

// Matches `shape` to the input's rule; binds its symbols only when it fits
// (a shape that does not is the daemon's to refuse, with its message).
void Bind(const std::string& op, const v1::TensorSpec& in, const std::vector<int64_t>& shape,
          ShapeBindings* bind) {
  if (!SimplePattern(in.shape())) return;
  ShapeBindings trial = *bind;
  if (MatchShape(op, in.name(), ShapePattern::Parse(in.shape()), shape, &trial).ok())
    *bind = std::move(trial);
}

// The shape a pattern gives over the symbols bound so far, if it names
// only bound ones.
std::optional<std::vector<int64_t>> Eval(const std::string& op, const std::string& pattern,
                                         const ShapeBindings& bind) {
  if (!SimplePattern(pattern)) return std::nullopt;
  const ShapePattern pat = ShapePattern::Parse(pattern);
  if (pat.any) return std::nullopt;
  Shape s;
  if (!EvalShape(op, pat, bind, &s).ok()) return std::nullopt;
  return s;
}

}  // namespace

v1::InputGeneration GenerationOf(const v1::KernelInfo& k, int i) {
  const v1::TensorSpec& spec = k.inputs(i);
  if (spec.has_generation()) return spec.generation();
  v1::InputGeneration g;
  if (const OpDef* op = OpRegistry::Global().Find(k.name())) {
    if (const int j = op->InputIndex(spec.name()); j >= 0) {
      const InputDef& in = op->inputs[static_cast<size_t>(j)];
      g.set_kind(static_cast<v1::InputGeneration::Kind>(static_cast<int>(in.gen)));
      g.set_upper(in.gen_upper);
      g.set_shape(in.gen_shape);
    }
  }
  return g;
}

bool GenerateInputs(const v1::KernelInfo& k, const InputRequest& r, std::mt19937_64& rng,
                    HostTensors* out, std::string* error) {
  for (const auto& [name, unused] : r.overrides) {
    bool known = false;
    for (const auto& in : k.inputs()) known = known || in.name() == name;
    if (!known) {
      std::string names;
      for (const auto& in : k.inputs()) names += (names.empty() ? "" : ", ") + in.name();
      *error = k.name() + " has no input '" + name + "' (its inputs: " + names + ")";
      return false;
    }
  }
  // Dtypes and shapes first, binding each input's symbols in turn, so a
  // later input can be sized from the earlier ones and an index bounded by
  // a dim of an input that comes after it.
  ShapeBindings bind;
  std::vector<std::pair<DType, std::vector<int64_t>>> plan;
  std::vector<v1::InputGeneration> gens;
  for (int i = 0; i < k.inputs_size(); ++i) {
    const v1::TensorSpec& in = k.inputs(i);
    gens.push_back(GenerationOf(k, i));
    const v1::InputGeneration& g = gens.back();
    DType dt = r.dtype.value_or(DType::kFloat32);
    std::vector<int64_t> shape = r.shape;
    if (auto it = r.overrides.find(in.name()); it != r.overrides.end()) {
      std::tie(dt, shape) = it->second;
      if (!Accepts(in, dt)) {
        *error = k.name() + ": input '" + in.name() + "' takes " + DTypeList(in) + ", not " +
                 std::string(DTypeName(dt));
        return false;
      }
    } else {
      if (!Accepts(in, dt)) {
        // The first input's dtype is the one the user picks: one it does
        // not take is a mistake to report (float64 used to send float16).
        if (i == 0 && r.dtype) {
          *error = k.name() + ": --dtype " + std::string(DTypeName(dt)) + " is not one input '" +
                   in.name() + "' takes (" + DTypeList(in) + ")";
          return false;
        }
        dt = static_cast<DType>(in.dtypes(0));
      }
      if (i > 0) {
        if (auto s = Eval(k.name(), g.shape(), bind)) {
          shape = *s;
          // An indptr's generation shape counts its segments.
          if (g.kind() == v1::InputGeneration::INDPTR && !shape.empty()) ++shape.back();
        } else if (auto t = Eval(k.name(), in.shape(), bind)) {
          shape = *t;
        }
      }
    }
    Bind(k.name(), in, shape, &bind);
    plan.emplace_back(dt, std::move(shape));
  }
  for (int i = 0; i < k.inputs_size(); ++i) {
    const auto& [dt, shape] = plan[static_cast<size_t>(i)];
    const v1::InputGeneration& g = gens[static_cast<size_t>(i)];
    HostTensor t;
    switch (g.kind()) {
      case v1::InputGeneration::PROBABILITIES: {
        t = Random(dt, shape, rng, 0.05, 1);
        const size_t row =
            shape.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(shape.back(), 1));
        for (size_t at = 0; at < t.values.size(); at += row) {
          double sum = 0;
          for (size_t j = at; j < at + row && j < t.values.size(); ++j) sum += t.values[j];
          for (size_t j = at; j < at + row && j < t.values.size(); ++j)
            t.values[j] = RoundTo(dt, t.values[j] / sum);
        }
        break;
      }
      case v1::InputGeneration::INDEX: {
        const int64_t upper = GenUpper(bind, g.upper());
        t = upper > 0 ? Random(dt, shape, rng, 0, static_cast<double>(upper))
                      : Random(dt, shape, rng, 0, 1);
        break;
      }
      case v1::InputGeneration::INDPTR:
      case v1::InputGeneration::LENGTH:
      case v1::InputGeneration::PERMUTATION:
      case v1::InputGeneration::SEGMENT:
      case v1::InputGeneration::MODULO: {
        // The proto's kinds are InputGen's values (kerneld/schema.h).
        t = Random(dt, shape, rng, 0, 1);
        StructuredIndex(static_cast<InputGen>(g.kind()), GenUpper(bind, g.upper()), rng, &t.values);
        break;
      }
      default:
        t = IsFloating(dt) ? Random(dt, shape, rng) : Random(dt, shape, rng, 0, 2);
    }
    (*out)[k.inputs(i).name()] = std::move(t);
  }
  return true;
}

}  // namespace kerneld::client
