// scale: y = x * factor, element-wise.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

// The kernel multiplies in float32: the factor it sees is a float.
bool ScaleReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                    std::string* error) {
  const HostTensor* x = RefInput(in, "x", "scale", error);
  if (!x) return false;
  const double f = static_cast<float>(AttrOr(attrs, "factor", 1.0));
  HostTensor y = *x;
  for (auto& v : y.values) v *= f;
  (*out)["y"] = std::move(y);
  return true;
}

}  // namespace

KERNELD_OP(scale) {
  OpDef op("scale");
  op.Doc(
        "y = x * factor, element-wise. Computed in float32 and rounded once to x's dtype "
        "(round to nearest even). y may alias x (in place).")
      .Input("x", kFloatingTypes, "[...]", "any shape, contiguous")
      .Output("y", SameAs("x"), "x's dtype and shape")
      .MayAlias("y", "x")
      .Attr("factor", AttrType::kFloat, "the multiplier");
  op.Reference(ScaleReference);
  op.Bench({[](int64_t t, int64_t h) {
              return std::map<std::string, Shape>{{"x", {t, h}}};
            },
            {{"factor", 1.5}}});
  return op;
}

}  // namespace kerneld
