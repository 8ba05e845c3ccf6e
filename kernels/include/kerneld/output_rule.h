// How an op's output gets its dtype and shape from the validated inputs:
// the same as an input, a shape pattern over the bound symbols, or a
// function of its own.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kerneld/attr.h"
#include "kerneld/dtype.h"
#include "kerneld/shape_pattern.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld {

struct OpDef;

struct OutputSpec {
  DType dtype = DType::kInvalid;
  Shape shape;
};

// Computes an output's dtype and shape from the validated inputs.
using OutputRuleFn =
    std::function<Status(const OpDef&, const std::vector<TensorView>& inputs, const AttrMap& attrs,
                         const ShapeBindings& bind, OutputSpec* out)>;

struct OutputRule {
  std::string description;  // "same as x", "[..., d] float32"
  OutputRuleFn fn;
  // What SameAs and ShapeOf say, for a client that describes the op
  // without running it (the KServe front end's model metadata): the input
  // whose dtype the output takes ("": fixed_dtype), the input whose shape
  // it takes (SameAs), else the shape pattern (ShapeOf). A rule of its own
  // (fn alone) leaves them empty.
  std::string dtype_of;
  DType fixed_dtype = DType::kInvalid;
  std::string shape_of;
  ShapePattern shape;
};

// Output dtype and shape equal input `name`'s.
OutputRule SameAs(const std::string& name);
// Output shape from a pattern over bound symbols; dtype from input `dtype_of`.
OutputRule ShapeOf(const std::string& pattern, const std::string& dtype_of);
// Output shape from a pattern; fixed dtype.
OutputRule ShapeOf(const std::string& pattern, DType dtype);

}  // namespace kerneld
