// The OpDef builder and its lookups.
#include "kerneld/schema.h"

#include <cstdio>
#include <cstdlib>

namespace kerneld {

OpDef& OpDef::Input(std::string n, DTypeSet dts, const std::string& shape, std::string d) {
  InputDef in;
  in.name = std::move(n);
  in.dtypes = dts;
  in.shape = ShapePattern::Parse(shape);
  in.doc = std::move(d);
  inputs.push_back(std::move(in));
  return *this;
}
// A misdeclared generation hint is a programming error, caught by the
// registry test like a malformed shape pattern.
OpDef& OpDef::Gen(InputGen kind, std::string upper) {
  const bool takes_upper = kind != InputGen::kUniform && kind != InputGen::kProbabilities;
  if (inputs.empty() || takes_upper == upper.empty()) {
    std::fprintf(stderr,
                 "kerneld: %s: Gen() follows an Input(); every kind but kUniform and "
                 "kProbabilities, and only those, names the symbol bounding its values\n",
                 name.c_str());
    std::abort();
  }
  inputs.back().gen = kind;
  inputs.back().gen_upper = std::move(upper);
  return *this;
}
OpDef& OpDef::GenShape(const std::string& pattern) {
  if (inputs.empty()) {
    std::fprintf(stderr, "kerneld: %s: GenShape() follows an Input()\n", name.c_str());
    std::abort();
  }
  inputs.back().gen_shape = ShapePattern::Parse(pattern).text;  // aborts when malformed
  return *this;
}
OpDef& OpDef::Output(std::string n, OutputRule rule, std::string d) {
  OutputDef o;
  o.name = std::move(n);
  o.rule = std::move(rule);
  o.doc = std::move(d);
  outputs.push_back(std::move(o));
  return *this;
}
OpDef& OpDef::InPlace(const std::string& output, const std::string& input) {
  for (auto& o : outputs)
    if (o.name == output) o.in_place_of = input;
  return *this;
}
OpDef& OpDef::MayAlias(const std::string& output, const std::string& input) {
  for (auto& o : outputs)
    if (o.name == output) o.may_alias = input;
  return *this;
}
OpDef& OpDef::Attr(std::string n, AttrType t, std::string d) {
  attrs.push_back({std::move(n), t, std::nullopt, std::move(d)});
  return *this;
}
OpDef& OpDef::AttrWithDefault(std::string n, AttrType t, AttrValue def, std::string d) {
  attrs.push_back({std::move(n), t, std::move(def), std::move(d)});
  return *this;
}
OpDef& OpDef::SameDType(const std::string& a, const std::string& b) {
  same_dtype.emplace_back(a, b);
  return *this;
}
OpDef& OpDef::Check(CheckFn fn) {
  checks.push_back(std::move(fn));
  return *this;
}
OpDef& OpDef::Reference(ReferenceFn fn) {
  reference = std::move(fn);
  return *this;
}
OpDef& OpDef::Bench(BenchSpec spec) {
  bench = std::move(spec);
  return *this;
}
OpDef& OpDef::TuneBy(std::vector<std::string> names, TuneDimsFn fn) {
  if (names.empty() || names.size() > static_cast<size_t>(kMaxTuneDims) || !fn) {
    std::fprintf(stderr, "kerneld: %s: TuneBy takes 1 to %d dims and a function\n", name.c_str(),
                 kMaxTuneDims);
    std::abort();
  }
  tune_dims = {std::move(names), std::move(fn)};
  return *this;
}
OpDef& OpDef::Impl(std::string backend, KernelFn fn, Requirements req, int priority) {
  ImplDef impl;
  impl.backend = std::move(backend);
  impl.fn = std::move(fn);
  impl.requires_ = std::move(req);
  impl.priority = priority;
  impls.push_back(std::move(impl));
  return *this;
}

int OpDef::InputIndex(std::string_view n) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == n) return static_cast<int>(i);
  return -1;
}
int OpDef::OutputIndex(std::string_view n) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == n) return static_cast<int>(i);
  return -1;
}
const AttrDef* OpDef::FindAttr(std::string_view n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}
const ImplDef* OpDef::FindImpl(std::string_view backend) const {
  for (const auto& i : impls)
    if (i.backend == backend) return &i;
  return nullptr;
}

}  // namespace kerneld
