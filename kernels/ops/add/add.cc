// add: y = a + b, element-wise.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

bool AddReference(const HostTensors& in, const AttrMap&, HostTensors* out, std::string* error) {
  const HostTensor* a = RefInput(in, "a", "add", error);
  const HostTensor* b = RefInput(in, "b", "add", error);
  if (!a || !b) return false;
  if (a->values.size() != b->values.size()) return *error = "add: a and b differ in size", false;
  HostTensor y = *a;
  for (size_t i = 0; i < y.values.size(); ++i) y.values[i] += b->values[i];
  (*out)["y"] = std::move(y);
  return true;
}

}  // namespace

KERNELD_OP(add) {
  OpDef op("add");
  op.Doc(
        "y = a + b, element-wise; a and b have the same dtype and shape. Accumulate in "
        "float32, round once to the output dtype (round to nearest even). y may alias a "
        "(in place).")
      .Input("a", kFloatingTypes, "[...]", "any shape, contiguous")
      .Input("b", kFloatingTypes, "[...]", "a's dtype and shape, contiguous")
      .Output("y", SameAs("a"), "a's dtype and shape")
      .MayAlias("y", "a")
      .SameDType("a", "b")
      .Check([](const OpDef& def, const std::vector<TensorView>& in, const AttrMap&,
                ShapeBindings*) -> Status {
        // "[...]" binds nothing, so the shapes are compared here.
        const TensorView& a = in[static_cast<size_t>(def.InputIndex("a"))];
        const TensorView& b = in[static_cast<size_t>(def.InputIndex("b"))];
        if (a.shape != b.shape)
          return InvalidArgument("add: 'b' has shape " + ShapeToString(b.shape) + ", expected " +
                                 ShapeToString(a.shape) + " (the shape of 'a')");
        return Status::Ok();
      });
  op.Reference(AddReference);
  op.Bench({[](int64_t t, int64_t h) {
              return std::map<std::string, Shape>{{"a", {t, h}}, {"b", {t, h}}};
            },
            {}});
  return op;
}

}  // namespace kerneld
