// OpDef builder, shape patterns, requirements and the registry.
#include "kerneld/op.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "kerneld/check.h"

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

// ----- ShapePattern ---------------------------------------------------------

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

// ----- output rules ---------------------------------------------------------

OutputRule SameAs(const std::string& name) {
  OutputRule r;
  r.description = "same dtype and shape as '" + name + "'";
  r.fn = [name](const OpDef& op, const std::vector<TensorView>& in, const AttrMap&,
                const ShapeBindings&, OutputSpec* out) -> Status {
    int i = op.InputIndex(name);
    if (i < 0) return Internal(op.name + ": SameAs names unknown input '" + name + "'");
    out->dtype = in[i].dtype;
    out->shape = in[i].shape;
    return Status::Ok();
  };
  return r;
}

OutputRule ShapeOf(const std::string& pattern, const std::string& dtype_of) {
  OutputRule r;
  r.description = pattern + ", dtype of '" + dtype_of + "'";
  ShapePattern pat = ShapePattern::Parse(pattern);
  r.fn = [pat, dtype_of](const OpDef& op, const std::vector<TensorView>& in, const AttrMap&,
                         const ShapeBindings& bind, OutputSpec* out) -> Status {
    int i = op.InputIndex(dtype_of);
    if (i < 0) return Internal(op.name + ": ShapeOf names unknown input '" + dtype_of + "'");
    out->dtype = in[i].dtype;
    return EvalShape(op.name, pat, bind, &out->shape);
  };
  return r;
}

OutputRule ShapeOf(const std::string& pattern, DType dtype) {
  OutputRule r;
  r.description = pattern + " " + std::string(DTypeName(dtype));
  ShapePattern pat = ShapePattern::Parse(pattern);
  r.fn = [pat, dtype](const OpDef& op, const std::vector<TensorView>&, const AttrMap&,
                      const ShapeBindings& bind, OutputSpec* out) -> Status {
    out->dtype = dtype;
    return EvalShape(op.name, pat, bind, &out->shape);
  };
  return r;
}

// ----- Requirements ---------------------------------------------------------

std::string Requirements::Describe() const {
  std::string s(DeviceKindName(device_kind));
  auto cc = [](int v) { return std::to_string(v / 10) + "." + std::to_string(v % 10); };
  if (device_kind == DeviceKind::kCuda && min_compute_capability > 0)
    s += ", compute capability >= " + cc(min_compute_capability);
  if (max_compute_capability != std::numeric_limits<int>::max())
    s += ", compute capability <= " + cc(max_compute_capability);
  if (!(dtypes == DTypeSet::All())) s += ", dtypes " + dtypes.ToString();
  if (alignment > 1) s += ", " + std::to_string(alignment) + "-byte aligned";
  if (max_elements != std::numeric_limits<int64_t>::max())
    s += ", at most " + std::to_string(max_elements) + " elements";
  if (!predicate_doc.empty()) s += ", " + predicate_doc;
  return s;
}

std::optional<std::string> Requirements::RejectDevice(const DeviceInfo& dev) const {
  auto cc = [](int v) { return std::to_string(v / 10) + "." + std::to_string(v % 10); };
  if (dev.device.kind != device_kind) {
    return "needs a " + std::string(DeviceKindName(device_kind)) + " device; " +
           dev.device.ToString() + " is " + std::string(DeviceKindName(dev.device.kind));
  }
  if (device_kind == DeviceKind::kCuda) {
    if (dev.compute_capability < min_compute_capability)
      return "needs compute capability >= " + cc(min_compute_capability) + "; " +
             dev.device.ToString() + " is " + cc(dev.compute_capability);
    if (dev.compute_capability > max_compute_capability)
      return "needs compute capability <= " + cc(max_compute_capability) + "; " +
             dev.device.ToString() + " is " + cc(dev.compute_capability);
  }
  if (!dev.healthy) return dev.device.ToString() + " is unhealthy";
  return std::nullopt;
}

bool Requirements::AcceptsDevice(const DeviceInfo& dev) const {
  if (dev.device.kind != device_kind) return false;
  if (device_kind == DeviceKind::kCuda && (dev.compute_capability < min_compute_capability ||
                                           dev.compute_capability > max_compute_capability))
    return false;
  return dev.healthy;
}

std::optional<std::string> Requirements::RejectRequest(const KernelContext& ctx,
                                                       const DeviceInfo* staged_on) const {
  const bool staged = staged_on != nullptr && staged_on->device.is_cuda();
  // A host view staged on a GPU starts on a fresh 256-byte boundary.
  auto align_of = [&](const TensorView& t) {
    return staged && t.device.is_cpu() ? 256 : t.alignment();
  };
  // The input's name is formatted only for a refusal: this runs twice on
  // every request's success path (the scheduler, then the call).
  auto check = [&](const TensorView& t, size_t i) -> std::optional<std::string> {
    auto what = [&] { return "input '" + ctx.op->inputs[i].name + "'"; };
    if (!dtypes.Contains(t.dtype))
      return what() + " dtype " + std::string(DTypeName(t.dtype)) + " not in " + dtypes.ToString();
    if (alignment > 1 && align_of(t) < alignment)
      return what() + " is " + std::to_string(align_of(t)) + "-byte aligned; needs " +
             std::to_string(alignment);
    if (t.numel() > max_elements)
      return what() + " has " + std::to_string(t.numel()) + " elements; at most " +
             std::to_string(max_elements);
    return std::nullopt;
  };
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].data == nullptr && ctx.inputs[i].numel() == 0) continue;
    if (auto r = check(ctx.inputs[i], i)) return r;
  }
  // Output dtypes may differ from inputs (softmax -> float32); only check
  // alignment and size on them.
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const TensorView& t = ctx.outputs[i];
    if (t.data == nullptr) continue;
    if (alignment > 1 && align_of(t) < alignment)
      return "output '" + ctx.op->outputs[i].name + "' is " + std::to_string(align_of(t)) +
             "-byte aligned; needs " + std::to_string(alignment);
  }
  if (predicate) return predicate(ctx);
  return std::nullopt;
}

// ----- OpDef builder --------------------------------------------------------

OpDef& OpDef::Input(std::string n, DTypeSet dts, const std::string& shape, std::string d) {
  inputs.push_back({std::move(n), dts, ShapePattern::Parse(shape), std::move(d)});
  return *this;
}
// A misdeclared generation hint is a programming error, caught by the
// registry test like a malformed shape pattern.
OpDef& OpDef::Gen(InputGen kind, std::string upper) {
  if (inputs.empty() || (kind == InputGen::kIndex) == upper.empty()) {
    std::fprintf(stderr,
                 "kerneld: %s: Gen() follows an Input(); kIndex, and only kIndex, names "
                 "the symbol bounding its values\n",
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

// ----- KernelContext --------------------------------------------------------

const TensorView& KernelContext::input(std::string_view n) const {
  return inputs.at(static_cast<size_t>(op->InputIndex(n)));
}
TensorView& KernelContext::output(std::string_view n) {
  return outputs.at(static_cast<size_t>(op->OutputIndex(n)));
}
double KernelContext::attr_f(std::string_view n) const {
  const AttrValue& v = attrs.find(n)->second;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
int64_t KernelContext::attr_i(std::string_view n) const {
  return std::get<int64_t>(attrs.find(n)->second);
}
bool KernelContext::attr_b(std::string_view n) const {
  return std::get<bool>(attrs.find(n)->second);
}
const std::string& KernelContext::attr_s(std::string_view n) const {
  return std::get<std::string>(attrs.find(n)->second);
}

// ----- OpRegistry -----------------------------------------------------------

namespace {

// What the registrars recorded at static initialization, keyed by op id.
struct Pending {
  std::map<std::string, OpDefineFn> ops;
  std::multimap<std::string, std::pair<std::string, ImplDefineFn>> impls;  // id -> (file, fn)
  std::set<std::string> backends;                                          // KERNELD_BACKEND
};
Pending& PendingRegistrations() {
  static Pending* p = new Pending();  // never destroyed: registrars may outlive main
  return *p;
}

[[noreturn]] void RegistrationFailed(const std::string& what) {
  std::fprintf(stderr, "kerneld: %s\n", what.c_str());
  std::abort();
}

}  // namespace

OpRegistrar::OpRegistrar(const char* id, OpDefineFn fn) {
  if (!PendingRegistrations().ops.emplace(id, fn).second)
    RegistrationFailed(std::string("KERNELD_OP(") + id + ") defined twice");
}

ImplRegistrar::ImplRegistrar(const char* op_id, const char* file, ImplDefineFn fn) {
  PendingRegistrations().impls.emplace(op_id, std::make_pair(std::string(file), fn));
}

BackendRegistrar::BackendRegistrar(const char* name) {
  PendingRegistrations().backends.insert(name);
}

std::vector<std::string> OpRegistry::KnownBackends() const {
  std::set<std::string> s(PendingRegistrations().backends);
  for (const auto& b : Backends()) s.insert(b);
  return {s.begin(), s.end()};
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    const Pending& p = PendingRegistrations();
    for (const auto& [id, impl] : p.impls)
      if (!p.ops.count(id))
        RegistrationFailed(impl.first + ": KERNELD_IMPL(" + id + ", ...) names no KERNELD_OP");
    for (const auto& [id, define] : p.ops) {
      OpDef op = define();
      auto [b, e] = p.impls.equal_range(id);
      for (auto it = b; it != e; ++it) it->second.second(op);
      // One order whatever the link order: by backend name (cpu first).
      std::stable_sort(op.impls.begin(), op.impls.end(),
                       [](const ImplDef& x, const ImplDef& y) { return x.backend < y.backend; });
      if (Status st = r->Register(std::move(op)); !st.ok())
        RegistrationFailed("registering " + id + ": " + st.ToString());
    }
    return r;
  }();
  return *reg;
}

Status OpRegistry::Register(OpDef op) {
  if (op.name.empty()) return InvalidArgument("op without a name");
  if (ops_.count(op.name))
    return {StatusCode::kAlreadyExists, "op '" + op.name + "' registered twice"};
  std::set<std::string> seen;
  for (const auto& i : op.impls)
    if (!seen.insert(i.backend).second)
      return {StatusCode::kAlreadyExists, op.name + ": two '" + i.backend + "' implementations"};
  for (const auto& o : op.outputs) {
    if (!o.in_place_of.empty() && op.InputIndex(o.in_place_of) < 0)
      return InvalidArgument(op.name + ": output '" + o.name + "' in place of unknown input");
    if (!o.may_alias.empty() && op.InputIndex(o.may_alias) < 0)
      return InvalidArgument(op.name + ": output '" + o.name + "' aliases unknown input");
  }
  std::string name = op.name;
  ops_.emplace(name, std::make_unique<OpDef>(std::move(op)));
  return Status::Ok();
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> OpRegistry::List() const {
  std::vector<const OpDef*> out;
  for (const auto& [_, op] : ops_) out.push_back(op.get());
  return out;
}

std::vector<std::string> OpRegistry::Backends() const {
  std::set<std::string> s;
  for (const auto& [_, op] : ops_)
    for (const auto& i : op->impls) s.insert(i.backend);
  return {s.begin(), s.end()};
}

}  // namespace kerneld
