// Validation of a request against an op's schema. Every failure is one
// precise message that names the op, the tensor, the dimension, what was
// expected and what came:
//   rmsnorm: 'weight' dim 0 ('hidden_size'): expected 4096, got 4095
//   scale: 'x' dtype int32 not in {float16, bfloat16, float32}
#pragma once

#include <vector>

#include "kerneld/op.h"

namespace kerneld {

// Checks attrs (unknown names, types, missing required ones) and fills in
// defaults. Ints are accepted where floats are expected (factor=2).
Status ResolveAttrs(const OpDef& op, const AttrMap& given, AttrMap* resolved);

// Checks input presence, dtypes, ranks and symbolic shapes; binds symbols.
// `inputs` is in schema order (the caller maps names to positions).
Status ValidateInputs(const OpDef& op, const std::vector<TensorView>& inputs,
                      const AttrMap& attrs, ShapeBindings* bind);

// Computes each output's dtype and shape (schema order).
Status InferOutputs(const OpDef& op, const std::vector<TensorView>& inputs,
                    const AttrMap& attrs, const ShapeBindings& bind,
                    std::vector<OutputSpec>* outs);

// Checks a caller-provided output view against its inferred spec.
Status CheckOutput(const OpDef& op, int index, const OutputSpec& spec,
                   const TensorView& given);

// Matches one shape against a pattern, extending `bind`. `what` names the
// tensor in messages ("'weight'").
Status MatchShape(const std::string& op, const std::string& what,
                  const ShapePattern& pat, const Shape& shape, ShapeBindings* bind);

// Evaluates a pattern over bound symbols into a concrete shape.
Status EvalShape(const std::string& op, const ShapePattern& pat,
                 const ShapeBindings& bind, Shape* out);

}  // namespace kerneld
