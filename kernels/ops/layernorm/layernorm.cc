// layernorm: y = (x - mean) * rsqrt(var + eps) * gamma + beta, per row.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

bool LayerNormReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                        std::string* error) {
  const HostTensor* x = RefInput(in, "x", "layernorm", error);
  const HostTensor* g = RefInput(in, "gamma", "layernorm", error);
  const HostTensor* b = RefInput(in, "beta", "layernorm", error);
  if (!x || !g || !b) return false;
  int64_t rows = 0, h = 0;
  if (!RefRows(*x, "layernorm", &rows, &h, error)) return false;
  const double eps = static_cast<float>(AttrOr(attrs, "eps", 1e-5));
  HostTensor y = *x;
  for (int64_t row = 0; row < rows; ++row) {
    double* v = y.values.data() + row * h;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < h; ++i) mean += v[i];
    mean /= static_cast<double>(h);
    for (int64_t i = 0; i < h; ++i) var += (v[i] - mean) * (v[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(h) + eps);
    for (int64_t i = 0; i < h; ++i) {
      const auto k = static_cast<size_t>(i);
      v[i] = (v[i] - mean) * rstd * g->values[k] + b->values[k];
    }
  }
  (*out)["y"] = std::move(y);
  return true;
}

}  // namespace

KERNELD_OP(layernorm) {
  OpDef op("layernorm");
  op.Doc(
        "Layer norm over the last dim: y = (x - mean(x)) * rsqrt(var(x) + eps) * gamma + beta, "
        "var the biased (population) variance, computed from the centred values. Accumulate "
        "in float32, round once to the output dtype. y may alias x (in place).")
      .Input("x", kFloatingTypes, "[..., hidden_size]", "rows of hidden_size, contiguous")
      .Input("gamma", kFloatingTypes, "[hidden_size]", "x's dtype")
      .Input("beta", kFloatingTypes, "[hidden_size]", "x's dtype")
      .Output("y", SameAs("x"), "x's dtype and shape")
      .MayAlias("y", "x")
      .SameDType("x", "gamma")
      .SameDType("x", "beta")
      .AttrWithDefault("eps", AttrType::kFloat, 1e-5, "added to the variance before the rsqrt");
  op.Reference(LayerNormReference);
  op.Bench({[](int64_t t, int64_t h) {
              return std::map<std::string, Shape>{{"x", {t, h}}, {"gamma", {h}}, {"beta", {h}}};
            },
            {}});
  return op;
}

}  // namespace kerneld
