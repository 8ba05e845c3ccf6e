// The output rules an op's schema names (SameAs, ShapeOf).
#include "kerneld/output_rule.h"

#include "kerneld/check.h"
#include "kerneld/schema.h"

namespace kerneld {

OutputRule SameAs(const std::string& name) {
  OutputRule r;
  r.description = "same dtype and shape as '" + name + "'";
  r.dtype_of = name;
  r.shape_of = name;
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
  r.dtype_of = dtype_of;
  r.shape = pat;
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
  r.fixed_dtype = dtype;
  r.shape = pat;
  r.fn = [pat, dtype](const OpDef& op, const std::vector<TensorView>&, const AttrMap&,
                      const ShapeBindings& bind, OutputSpec* out) -> Status {
    out->dtype = dtype;
    return EvalShape(op.name, pat, bind, &out->shape);
  };
  return r;
}

}  // namespace kerneld
