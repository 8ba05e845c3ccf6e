#include "sandbox/kernel_spec.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "kerneld/jit.h"
#include "service/tensor_codec.h"

namespace kerneld::server::sandbox {

namespace {

bool IsIdent(const std::string& s, bool lower_only) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || (!lower_only && s[0] == '_')))
    return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (lower_only ? !(std::islower(u) || std::isdigit(u) || c == '_')
                   : !(std::isalnum(u) || c == '_'))
      return false;
  }
  return true;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// A DTypeSet of a non-empty list (duplicates are harmless: the set ORs bits).
DTypeSet SetOf(const std::vector<DType>& v) {
  DType a[10];
  for (size_t i = 0; i < 10; ++i) a[i] = v[std::min(i, v.size() - 1)];
  return DTypeSet{a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]};
}

Status DTypesOf(const std::string& what, const v1::TensorSpec& t, std::vector<DType>* out) {
  if (t.dtypes_size() > 10) return InvalidArgument(what + ": more than 10 dtypes");
  for (int d : t.dtypes()) {
    const DType dt = FromProto(d);
    if (dt == DType::kInvalid || CudaTypeName(dt)[0] == '\0')
      return InvalidArgument(what + ": dtype " + std::to_string(d) + " is not one a kernel takes");
    if (std::find(out->begin(), out->end(), dt) == out->end()) out->push_back(dt);
  }
  return Status::Ok();
}

// "same as 'x'", "same dtype and shape as 'x'": the input's name; "" when
// the rule is not of that form.
std::string SameAsInput(const std::string& rule) {
  const std::string t = Trim(rule);
  for (const char* prefix : {"same as ", "same dtype and shape as "}) {
    const std::string p = prefix;
    if (t.rfind(p, 0) != 0) continue;
    std::string name = Trim(t.substr(p.size()));
    if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'')
      name = name.substr(1, name.size() - 2);
    return name.empty() ? std::string("'") : name;  // "'" never names an input
  }
  return "";
}

Status CheckCompileOption(const std::string& o) {
  if (o.size() > 128) return InvalidArgument("compile option longer than 128 bytes");
  static const char* kExact[] = {
      "--use_fast_math", "-use_fast_math",  "-lineinfo",       "--generate-line-info",
      "--fmad=true",     "--fmad=false",    "-ftz=true",       "-ftz=false",
      "-prec-div=true",  "-prec-div=false", "-prec-sqrt=true", "-prec-sqrt=false"};
  for (const char* e : kExact)
    if (o == e) return Status::Ok();
  if (o.rfind("-D", 0) == 0) {
    const std::string def = o.substr(2);
    const std::string name = def.substr(0, def.find('='));
    if (!IsIdent(name, false))
      return InvalidArgument("compile option " + Quote(o) + ": bad macro name");
    for (char c : def)
      if (!std::isprint(static_cast<unsigned char>(c)))
        return InvalidArgument("compile option " + Quote(o) + ": unprintable byte");
    return Status::Ok();
  }
  if (o.rfind("--maxrregcount=", 0) == 0) {
    const std::string n = o.substr(15);
    if (!n.empty() && n.size() <= 3 && std::all_of(n.begin(), n.end(), ::isdigit))
      return Status::Ok();
  }
  return InvalidArgument("compile option " + Quote(o) +
                         " is not allowed (allowed: -DNAME[=VALUE], --use_fast_math, -lineinfo, "
                         "--fmad=, -ftz=, -prec-div=, -prec-sqrt=, --maxrregcount=N)");
}

}  // namespace

const char* CudaTypeName(DType dt) {
  // The floating types as the built-in JIT kernels spell them.
  if (const char* jit = JitTypeName(dt); *jit != '\0') return jit;
  switch (dt) {
    case DType::kFloat64:
      return "double";
    case DType::kInt8:
      return "signed char";
    case DType::kInt16:
      return "short";
    case DType::kInt32:
      return "int";
    case DType::kInt64:
      return "long long";
    case DType::kUInt8:
      return "unsigned char";
    case DType::kBool:
      return "bool";
    default:
      return "";
  }
}

Status ParseShapePattern(const std::string& what, const std::string& text, ShapePattern* out) {
  *out = ShapePattern();
  out->text = text;
  auto bad = [&](const std::string& why) {
    return InvalidArgument(what + ": shape " + Quote(text) + ": " + why +
                           " (write \"[n]\", \"[rows, 2*d]\", \"[..., hidden]\")");
  };
  if (text.size() > kMaxPatternBytes) return bad("longer than 256 bytes");
  const std::string t = Trim(text);
  if (t.size() < 2 || t.front() != '[' || t.back() != ']') return bad("expected [...]");
  const std::string body = Trim(t.substr(1, t.size() - 2));
  if (body == "...") {
    out->any = true;
    return Status::Ok();
  }
  if (body.empty()) return Status::Ok();  // a scalar
  bool ellipsis = false;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = Trim(body.substr(start, comma - start));
    start = comma + 1;
    if (out->dims.size() >= static_cast<size_t>(kMaxDims))
      return bad("more than " + std::to_string(kMaxDims) + " dims");
    DimPattern d;
    if (item == "...") {
      if (ellipsis) return bad("two ellipses");
      ellipsis = true;
      d.kind = DimPattern::Kind::kEllipsis;
    } else if (!item.empty() && std::all_of(item.begin(), item.end(), ::isdigit)) {
      if (item.size() > 12) return bad("dim " + Quote(item) + " too large");
      d.kind = DimPattern::Kind::kConst;
      d.value = std::stoll(item);
    } else {
      d.kind = DimPattern::Kind::kSymbol;
      d.value = 1;
      std::string sym = item;
      const size_t star = item.find('*');
      if (star != std::string::npos) {
        const std::string coeff = Trim(item.substr(0, star));
        if (coeff.empty() || coeff.size() > 6 ||
            !std::all_of(coeff.begin(), coeff.end(), ::isdigit))
          return bad("coefficient " + Quote(coeff) + " is not an integer of 1..999999");
        d.value = std::stoll(coeff);
        if (d.value <= 0) return bad("coefficient must be positive");
        sym = Trim(item.substr(star + 1));
      }
      if (!IsIdent(sym, false)) return bad("dim " + Quote(item) + " is not a number or a name");
      d.symbol = sym;
    }
    out->dims.push_back(d);
    if (comma == body.size()) break;
  }
  return Status::Ok();
}

Status ParseKernelSpec(const v1::RegisterKernelRequest& req, UserKernelSpec* out) {
  *out = UserKernelSpec();
  UserKernelSpec& s = *out;
  if (!IsIdent(req.name(), true))
    return InvalidArgument("RegisterKernel: name " + Quote(req.name()) +
                           " must be 1-64 bytes of [a-z0-9_], starting with a letter");
  s.name = req.name();
  const std::string& who = s.name;
  if (req.cuda_source().empty()) return InvalidArgument(who + ": cuda_source is empty");
  if (req.cuda_source().size() > kMaxSourceBytes)
    return InvalidArgument(who + ": cuda_source of " + std::to_string(req.cuda_source().size()) +
                           " bytes; at most 256 KiB");
  if (req.cuda_source().find('\0') != std::string::npos)
    return InvalidArgument(who + ": cuda_source has a NUL byte");
  if (req.doc().size() > kMaxDocBytes) return InvalidArgument(who + ": doc longer than 4 KiB");
  s.doc = req.doc();
  // The entry: "name", "ns::name", or "name<T>".
  s.entry = req.entry();
  std::string base = s.entry;
  if (base.size() > 3 && base.compare(base.size() - 3, 3, "<T>") == 0) {
    s.templated = true;
    base.resize(base.size() - 3);
  }
  bool entry_ok = !base.empty() && base.size() <= 256 && base.back() != ':';
  for (size_t i = 0; entry_ok && i < base.size(); ++i) {
    const char c = base[i];
    if (c == ':') {
      entry_ok = i + 1 < base.size() && base[i + 1] == ':' && i > 0;
      ++i;
      continue;
    }
    entry_ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }
  if (!entry_ok || std::isdigit(static_cast<unsigned char>(base[0])))
    return InvalidArgument(who + ": entry " + Quote(s.entry) +
                           " must name the __global__ function: \"scale\", \"ns::scale\", or "
                           "\"scale<T>\" for a template over the first input's dtype");
  s.entry_base = base;

  if (req.inputs_size() < 1 || req.inputs_size() > kMaxTensors)
    return InvalidArgument(who + ": needs 1 to 16 inputs");
  if (req.outputs_size() < 1 || req.outputs_size() > kMaxTensors)
    return InvalidArgument(who + ": needs 1 to 16 outputs");
  if (req.attrs_size() > kMaxAttrs) return InvalidArgument(who + ": more than 16 attrs");
  std::set<std::string> names;
  auto take_name = [&](const std::string& kind, const std::string& n) -> Status {
    if (!IsIdent(n, false))
      return InvalidArgument(who + ": " + kind + " name " + Quote(n) +
                             " must be 1-64 bytes of [A-Za-z0-9_], not starting with a digit");
    if (!names.insert(n).second)
      return InvalidArgument(who + ": the name " + Quote(n) + " is used twice");
    return Status::Ok();
  };

  std::set<std::string> symbols;
  bool any_ellipsis = false;
  std::vector<DType> first_dtypes;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const v1::TensorSpec& t = req.inputs(i);
    KERNELD_RETURN_IF_ERROR(take_name("input", t.name()));
    const std::string what = who + ": input " + Quote(t.name());
    if (t.doc().size() > kMaxDocBytes) return InvalidArgument(what + ": doc longer than 4 KiB");
    std::vector<DType> dts;
    KERNELD_RETURN_IF_ERROR(DTypesOf(what, t, &dts));
    if (dts.empty()) return InvalidArgument(what + ": needs at least one dtype");
    if (i == 0) first_dtypes = dts;
    if (dts.size() > 1 && !s.templated)
      return InvalidArgument(what + ": several dtypes need a template entry (\"" + s.entry_base +
                             "<T>\", T the first input's dtype)");
    if (dts.size() > 1 && i > 0 && SetOf(dts) != SetOf(first_dtypes))
      return InvalidArgument(what + ": an input of several dtypes takes the first input's (T): " +
                             SetOf(first_dtypes).ToString());
    InputDef in;
    in.name = t.name();
    in.dtypes = SetOf(dts);
    in.doc = t.doc();
    KERNELD_RETURN_IF_ERROR(ParseShapePattern(what, t.shape(), &in.shape));
    for (const auto& d : in.shape.dims) {
      if (d.kind == DimPattern::Kind::kEllipsis) any_ellipsis = true;
      if (d.kind == DimPattern::Kind::kSymbol && symbols.insert(d.symbol).second) {
        if (symbols.size() > static_cast<size_t>(kMaxSymbols))
          return InvalidArgument(who + ": more than 16 shape symbols");
        s.symbols.push_back(d.symbol);
      }
    }
    if (in.shape.any) any_ellipsis = true;
    s.inputs.push_back(std::move(in));
  }
  if (s.templated && first_dtypes.size() < 1)
    return InvalidArgument(who + ": a template entry needs dtypes on the first input");

  for (const v1::TensorSpec& t : req.outputs()) {
    KERNELD_RETURN_IF_ERROR(take_name("output", t.name()));
    const std::string what = who + ": output " + Quote(t.name());
    if (t.doc().size() > kMaxDocBytes) return InvalidArgument(what + ": doc longer than 4 KiB");
    UserOutput o;
    o.name = t.name();
    o.doc = t.doc();
    std::vector<DType> dts;
    KERNELD_RETURN_IF_ERROR(DTypesOf(what, t, &dts));
    if (dts.size() > 1)
      return InvalidArgument(what + ": at most one dtype (none: the first input's)");
    if (!dts.empty()) o.dtype = dts[0];
    auto find_input = [&](const std::string& n) {
      for (const auto& in : s.inputs)
        if (in.name == n) return true;
      return false;
    };
    for (const auto* field : {&t.in_place_of(), &t.may_alias()})
      if (!field->empty() && !find_input(*field))
        return InvalidArgument(what + ": in_place_of / may_alias names no input (" + Quote(*field) +
                               ")");
    o.in_place_of = t.in_place_of();
    o.may_alias = t.may_alias();
    o.same_as = SameAsInput(t.shape());
    if (!o.in_place_of.empty() && o.same_as.empty()) o.same_as = o.in_place_of;
    if (!o.same_as.empty()) {
      if (!find_input(o.same_as))
        return InvalidArgument(what + ": shape " + Quote(t.shape()) + " names no input");
      if (!dts.empty())
        return InvalidArgument(what + ": \"same as\" takes the input's dtype; leave dtypes empty");
    } else {
      KERNELD_RETURN_IF_ERROR(ParseShapePattern(what, t.shape(), &o.shape));
      if (o.shape.any)
        return InvalidArgument(what +
                               ": an output's shape must be computable (\"same as 'x'\", or "
                               "a pattern over the inputs' symbols)");
      for (const auto& d : o.shape.dims) {
        if (d.kind == DimPattern::Kind::kSymbol && !symbols.count(d.symbol))
          return InvalidArgument(what + ": shape symbol " + Quote(d.symbol) +
                                 " is not bound by any input");
        if (d.kind == DimPattern::Kind::kEllipsis && !any_ellipsis)
          return InvalidArgument(what + ": '...' but no input binds one");
      }
    }
    s.outputs.push_back(std::move(o));
  }

  std::set<std::string> launch_names(symbols.begin(), symbols.end());
  for (const v1::AttrSpec& a : req.attrs()) {
    KERNELD_RETURN_IF_ERROR(take_name("attr", a.name()));
    const std::string what = who + ": attr " + Quote(a.name());
    if (symbols.count(a.name())) return InvalidArgument(what + " has the name of a shape symbol");
    if (a.doc().size() > kMaxDocBytes) return InvalidArgument(what + ": doc longer than 4 KiB");
    AttrDef d;
    d.name = a.name();
    d.doc = a.doc();
    if (a.type() == "float") {
      d.type = AttrType::kFloat;
    } else if (a.type() == "int") {
      d.type = AttrType::kInt;
      launch_names.insert(a.name());
    } else if (a.type() == "bool") {
      d.type = AttrType::kBool;
    } else {
      return InvalidArgument(what + ": type " + Quote(a.type()) + " (float, int or bool)");
    }
    if (!a.required() && a.has_default_value()) {
      AttrValue v;
      KERNELD_RETURN_IF_ERROR(FromProto([&] { return what + " default"; }, a.default_value(), &v));
      const bool fits = (d.type == AttrType::kFloat && (std::holds_alternative<double>(v) ||
                                                        std::holds_alternative<int64_t>(v))) ||
                        (d.type == AttrType::kInt && std::holds_alternative<int64_t>(v)) ||
                        (d.type == AttrType::kBool && std::holds_alternative<bool>(v));
      if (!fits) return InvalidArgument(what + ": default of another type");
      if (d.type == AttrType::kFloat && std::holds_alternative<int64_t>(v))
        v = static_cast<double>(std::get<int64_t>(v));
      d.default_value = v;
    } else if (!a.required()) {
      return InvalidArgument(what + ": not required, so it needs a default_value");
    }
    s.attrs.push_back(std::move(d));
  }
  KERNELD_RETURN_IF_ERROR(LaunchRule::Parse(req.launch(), launch_names, &s.launch));

  const auto& opts = req.options();
  if (opts.compile_options_size() > kMaxCompileOptions)
    return InvalidArgument(who + ": more than 16 compile options");
  for (const std::string& o : opts.compile_options()) {
    if (Status st = CheckCompileOption(o); !st.ok())
      return InvalidArgument(who + ": " + st.message());
    s.compile_options.push_back(o);
  }
  if (!opts.arch().empty()) {
    const std::string& a = opts.arch();
    bool ok = a.size() >= 5 && a.size() <= 8 && a.rfind("sm_", 0) == 0;
    for (size_t i = 3; ok && i < a.size(); ++i)
      ok = std::isdigit(static_cast<unsigned char>(a[i])) ||
           (i + 1 == a.size() && (a[i] == 'a' || a[i] == 'f'));
    if (!ok) return InvalidArgument(who + ": arch " + Quote(a) + " is not of the form sm_90");
    s.arch = a;
  }
  return Status::Ok();
}

OpDef BuildOpDef(const UserKernelSpec& spec) {
  OpDef op(spec.name);
  op.doc = spec.doc.empty() ? "user kernel (" + spec.entry + ")" : spec.doc;
  op.inputs = spec.inputs;
  // Inputs of several dtypes are T, the first input's (ParseKernelSpec).
  auto several = [](const DTypeSet& s) {
    int n = 0;
    s.ForEach([&](DType) { ++n; });
    return n > 1;
  };
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    if (several(spec.inputs[i].dtypes))
      op.same_dtype.emplace_back(spec.inputs[0].name, spec.inputs[i].name);
  const std::string& first = spec.inputs[0].name;
  for (const auto& o : spec.outputs) {
    OutputDef d;
    d.name = o.name;
    d.doc = o.doc;
    d.in_place_of = o.in_place_of;
    d.may_alias = o.may_alias;
    if (!o.same_as.empty())
      d.rule = SameAs(o.same_as);
    else if (o.dtype != DType::kInvalid)
      d.rule = ShapeOf(o.shape.text, o.dtype);
    else
      d.rule = ShapeOf(o.shape.text, first);
    op.outputs.push_back(std::move(d));
  }
  op.attrs = spec.attrs;
  return op;
}

std::vector<std::pair<DType, std::string>> EntryInstantiations(const UserKernelSpec& spec) {
  std::vector<std::pair<DType, std::string>> out;
  if (!spec.templated) {
    out.emplace_back(DType::kInvalid, spec.entry_base);
    return out;
  }
  spec.inputs[0].dtypes.ForEach(
      [&](DType dt) { out.emplace_back(dt, spec.entry_base + "<" + CudaTypeName(dt) + ">"); });
  return out;
}

namespace {

// The element type of tensor `name` for a call whose first input is `dt`.
DType ElementOf(const UserKernelSpec& spec, const std::string& name, DType dt) {
  for (const auto& in : spec.inputs) {
    if (in.name != name) continue;
    DType only = DType::kInvalid;
    int n = 0;
    in.dtypes.ForEach([&](DType d) {
      only = d;
      ++n;
    });
    return n == 1 ? only : dt;
  }
  for (const auto& o : spec.outputs) {
    if (o.name != name) continue;
    if (!o.same_as.empty()) return ElementOf(spec, o.same_as, dt);
    return o.dtype != DType::kInvalid ? o.dtype : ElementOf(spec, spec.inputs[0].name, dt);
  }
  return dt;
}

struct Param {
  std::string decl;                // "const float* x"
  std::vector<std::string> types;  // accepted C++ types
};

std::vector<Param> Params(const UserKernelSpec& spec, DType dt) {
  std::vector<Param> p;
  for (const auto& in : spec.inputs) {
    const std::string t = CudaTypeName(ElementOf(spec, in.name, dt));
    p.push_back({"const " + t + "* " + in.name, {"const " + t + "*", t + "*"}});
  }
  for (const auto& o : spec.outputs) {
    const std::string t = CudaTypeName(ElementOf(spec, o.name, dt));
    p.push_back({t + "* " + o.name, {t + "*"}});
  }
  for (const auto& s : spec.symbols) p.push_back({"int64_t " + s, {"long", "long long"}});
  for (const auto& a : spec.attrs) {
    if (a.type == AttrType::kFloat) p.push_back({"float " + a.name, {"float"}});
    if (a.type == AttrType::kInt) p.push_back({"int64_t " + a.name, {"long", "long long"}});
    if (a.type == AttrType::kBool) p.push_back({"bool " + a.name, {"bool"}});
  }
  return p;
}

}  // namespace

std::string EntrySignature(const UserKernelSpec& spec, DType dt) {
  std::vector<std::string> decls;
  for (const auto& p : Params(spec, dt)) decls.push_back(p.decl);
  return "void(" + Join(decls) + ")";
}

std::string SignatureChecks(const UserKernelSpec& spec) {
  std::string out =
      "\n// kerneld: the entry's parameters, checked against the spec\n"
      "namespace kerneld_check {\n"
      "template <class A, class B> struct same { static constexpr bool value = false; };\n"
      "template <class A> struct same<A, A> { static constexpr bool value = true; };\n"
      "template <int I, class F> struct arg { using type = void; };\n"
      "template <class R, class A0, class... As> struct arg<0, R (*)(A0, As...)> { using type = "
      "A0; };\n"
      "template <int I, class R, class A0, class... As> struct arg<I, R (*)(A0, As...)> {\n"
      "  using type = typename arg<I - 1, R (*)(As...)>::type; };\n"
      "template <class F> struct arity { static constexpr int value = -1; };\n"
      "template <class R, class... As> struct arity<R (*)(As...)> { static constexpr int value = "
      "sizeof...(As); };\n"
      "}  // namespace kerneld_check\n";
  for (const auto& [dt, expr] : EntryInstantiations(spec)) {
    const std::vector<Param> params = Params(spec, dt);
    const std::string sig = EntrySignature(spec, dt);
    const std::string fn = "decltype(&" + expr + ")";
    out += "static_assert(kerneld_check::arity<" + fn +
           ">::value == " + std::to_string(params.size()) + ", \"kerneld: " + expr +
           " must be declared " + sig + "\");\n";
    for (size_t i = 0; i < params.size(); ++i) {
      std::vector<std::string> alts;
      for (const auto& t : params[i].types)
        alts.push_back("kerneld_check::same<typename kerneld_check::arg<" + std::to_string(i) +
                       ", " + fn + ">::type, " + t + ">::value");
      out += "static_assert(" + Join(alts, " || ") + ", \"kerneld: parameter " +
             std::to_string(i + 1) + " of " + expr + " must be " + params[i].decl + " (" + sig +
             ")\");\n";
    }
  }
  return out;
}

}  // namespace kerneld::server::sandbox
