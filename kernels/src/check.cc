// Schema validation: attrs, dtypes, symbolic shapes, outputs.
#include "kerneld/check.h"

#include <string>

#include "kerneld/size.h"

namespace kerneld {

namespace {

std::string DimName(const DimPattern& d) {
  if (d.value == 1) return d.symbol;
  return std::to_string(d.value) + "*" + d.symbol;
}

}  // namespace

Status ResolveAttrs(const OpDef& op, const AttrMap& given, AttrMap* resolved) {
  resolved->clear();
  for (const auto& [name, value] : given) {
    const AttrDef* def = op.FindAttr(name);
    if (def == nullptr) {
      std::vector<std::string> names;
      for (const auto& a : op.attrs) names.push_back(a.name);
      return InvalidArgument(
          op.name + ": unknown attr " + Quote(name) + "; " +
          (names.empty() ? "it takes no attrs" : "attrs are {" + Join(names) + "}"));
    }
    AttrValue v = value;
    bool ok = false;
    switch (def->type) {
      case AttrType::kFloat:
        if (auto* i = std::get_if<int64_t>(&value)) {
          v = static_cast<double>(*i);  // factor=2 means 2.0
          ok = true;
        } else {
          ok = std::holds_alternative<double>(value);
        }
        break;
      case AttrType::kInt:
        ok = std::holds_alternative<int64_t>(value);
        break;
      case AttrType::kBool:
        ok = std::holds_alternative<bool>(value);
        break;
      case AttrType::kString:
        ok = std::holds_alternative<std::string>(value);
        break;
    }
    if (!ok) {
      static const char* kKinds[] = {"float", "int", "bool", "string"};
      return InvalidArgument(op.name + ": attr '" + name + "' must be " +
                             std::string(AttrTypeName(def->type)) + ", got " +
                             kKinds[value.index()] + " " + Sanitize(AttrValueToString(value)));
    }
    resolved->emplace(name, std::move(v));
  }
  for (const auto& def : op.attrs) {
    if (resolved->count(def.name)) continue;
    if (!def.default_value)
      return InvalidArgument(op.name + ": missing required attr '" + def.name + "' (" +
                             std::string(AttrTypeName(def.type)) + ")");
    resolved->emplace(def.name, *def.default_value);
  }
  return Status::Ok();
}

Status MatchShape(const std::string& op, const std::string& what, const ShapePattern& pat,
                  const Shape& shape, ShapeBindings* bind) {
  if (pat.any) return Status::Ok();
  int ellipsis = -1;
  for (size_t i = 0; i < pat.dims.size(); ++i)
    if (pat.dims[i].kind == DimPattern::Kind::kEllipsis) ellipsis = static_cast<int>(i);
  const int64_t fixed = static_cast<int64_t>(pat.dims.size()) - (ellipsis >= 0 ? 1 : 0);
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (ellipsis < 0 ? rank != fixed : rank < fixed) {
    return InvalidArgument(op + ": " + what + " has shape " + ShapeToString(shape) + " (rank " +
                           std::to_string(rank) + "), expected " + pat.text +
                           (ellipsis < 0 ? " (rank " : " (rank >= ") + std::to_string(fixed) + ")");
  }
  const int64_t ell_len = ellipsis >= 0 ? rank - fixed : 0;
  int64_t dim = 0;
  for (size_t p = 0; p < pat.dims.size(); ++p) {
    const DimPattern& d = pat.dims[p];
    if (d.kind == DimPattern::Kind::kEllipsis) {
      Shape prefix(shape.begin() + dim, shape.begin() + dim + ell_len);
      if (bind->ellipsis && *bind->ellipsis != prefix) {
        return InvalidArgument(op + ": " + what + " has shape " + ShapeToString(shape) +
                               "; its leading dims " + ShapeToString(prefix) +
                               " must equal the other inputs' " + ShapeToString(*bind->ellipsis));
      }
      bind->ellipsis = prefix;
      dim += ell_len;
      continue;
    }
    const int64_t got = shape[static_cast<size_t>(dim)];
    const std::string where = op + ": " + what + " dim " + std::to_string(dim);
    if (d.kind == DimPattern::Kind::kConst) {
      if (got != d.value)
        return InvalidArgument(where + ": expected " + std::to_string(d.value) + ", got " +
                               std::to_string(got));
    } else {
      if (got % d.value != 0)
        return InvalidArgument(where + " ('" + DimName(d) + "'): expected a multiple of " +
                               std::to_string(d.value) + ", got " + std::to_string(got));
      const int64_t v = got / d.value;
      auto it = bind->symbols.find(d.symbol);
      if (it != bind->symbols.end() && it->second != v)
        return InvalidArgument(where + " ('" + DimName(d) + "'): expected " +
                               std::to_string(it->second * d.value) + ", got " +
                               std::to_string(got));
      bind->symbols[d.symbol] = v;
    }
    ++dim;
  }
  return Status::Ok();
}

Status EvalShape(const std::string& op, const ShapePattern& pat, const ShapeBindings& bind,
                 Shape* out) {
  out->clear();
  for (const DimPattern& d : pat.dims) {
    switch (d.kind) {
      case DimPattern::Kind::kEllipsis:
        if (bind.ellipsis) out->insert(out->end(), bind.ellipsis->begin(), bind.ellipsis->end());
        break;
      case DimPattern::Kind::kConst:
        out->push_back(d.value);
        break;
      case DimPattern::Kind::kSymbol: {
        auto it = bind.symbols.find(d.symbol);
        if (it == bind.symbols.end())
          return Internal(op + ": output shape uses unbound symbol '" + d.symbol + "'");
        // Symbols are bound from client dims: 2*d can overflow.
        auto dim = CheckedMul(it->second, d.value);
        if (!dim)
          return InvalidArgument(op + ": output dim " + std::to_string(out->size()) + " (" +
                                 std::to_string(d.value) + "*" + d.symbol + ", " + d.symbol +
                                 " = " + std::to_string(it->second) + ") overflows");
        out->push_back(*dim);
        break;
      }
    }
  }
  return Status::Ok();
}

Status ValidateInputs(const OpDef& op, const std::vector<TensorView>& inputs, const AttrMap& attrs,
                      ShapeBindings* bind) {
  if (inputs.size() != op.inputs.size())
    return Internal(op.name + ": input vector does not match the schema");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputDef& def = op.inputs[i];
    const TensorView& t = inputs[i];
    if (t.dtype == DType::kInvalid)
      return InvalidArgument(op.name + ": missing input '" + def.name + "'");
    // The label is formatted only for a refusal: "scale: input 'x'" is past
    // std::string's inline capacity, an allocation on every request.
    if (!CheckTensorSize("", t.dtype, t.shape).ok())
      return CheckTensorSize(op.name + ": input '" + def.name + "'", t.dtype, t.shape);
    // Kernels load whole elements: a view must start on a multiple of its
    // element size (the server realigns inline bytes and refuses buffer
    // references that would break this).
    if (reinterpret_cast<uintptr_t>(t.raw()) % ItemSize(t.dtype) != 0)
      return InvalidArgument(op.name + ": input '" + def.name +
                             "' starts at an address that is not a multiple of its " +
                             std::string(DTypeName(t.dtype)) + " size (" +
                             std::to_string(ItemSize(t.dtype)) + " bytes)");
    if (!def.dtypes.Contains(t.dtype))
      return InvalidArgument(op.name + ": '" + def.name + "' dtype " +
                             std::string(DTypeName(t.dtype)) + " not in " + def.dtypes.ToString());
    KERNELD_RETURN_IF_ERROR(MatchShape(op.name, "'" + def.name + "'", def.shape, t.shape, bind));
  }
  for (const auto& [a, b] : op.same_dtype) {
    const TensorView& ta = inputs[static_cast<size_t>(op.InputIndex(a))];
    const TensorView& tb = inputs[static_cast<size_t>(op.InputIndex(b))];
    if (ta.dtype != tb.dtype)
      return InvalidArgument(op.name + ": '" + b + "' dtype " + std::string(DTypeName(tb.dtype)) +
                             " must equal '" + a + "' dtype " + std::string(DTypeName(ta.dtype)));
  }
  for (const auto& check : op.checks) KERNELD_RETURN_IF_ERROR(check(op, inputs, attrs, bind));
  return Status::Ok();
}

Status InferOutputs(const OpDef& op, const std::vector<TensorView>& inputs, const AttrMap& attrs,
                    const ShapeBindings& bind, std::vector<OutputSpec>* outs) {
  outs->assign(op.outputs.size(), OutputSpec{});
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    OutputSpec& spec = (*outs)[i];
    KERNELD_RETURN_IF_ERROR(op.outputs[i].rule.fn(op, inputs, attrs, bind, &spec));
    // Outputs grow from inputs (gemm: [m, 0] @ [0, n] -> [m, n]): the same
    // checked size rule applies to every op's result, in this one place.
    // Labelled only for a refusal (as in ValidateInputs).
    if (!CheckTensorSize("", spec.dtype, spec.shape).ok())
      return CheckTensorSize(op.name + ": output '" + op.outputs[i].name + "'", spec.dtype,
                             spec.shape);
  }
  return Status::Ok();
}

Status CheckOutput(const OpDef& op, int index, const OutputSpec& spec, const TensorView& given) {
  const std::string& name = op.outputs[static_cast<size_t>(index)].name;
  if (given.dtype != spec.dtype)
    return InvalidArgument(op.name + ": output '" + name + "' dtype " +
                           std::string(DTypeName(given.dtype)) + ", expected " +
                           std::string(DTypeName(spec.dtype)));
  if (given.shape != spec.shape)
    return InvalidArgument(op.name + ": output '" + name + "' has shape " +
                           ShapeToString(given.shape) + ", expected " + ShapeToString(spec.shape));
  return Status::Ok();
}

}  // namespace kerneld
