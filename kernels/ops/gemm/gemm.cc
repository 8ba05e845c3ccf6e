// gemm: c = alpha * a @ b (or a @ b^T), float32 accumulation.
#include <optional>
#include <string>

#include "kerneld/check.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

bool TransposeB(const AttrMap& attrs) {
  auto it = attrs.find("transpose_b");
  return it != attrs.end() && std::get<bool>(it->second);
}

// b's layout depends on an attr, so its pattern is matched here rather than
// in the schema; this also binds N for the output shape.
Status CheckB(const OpDef& op, const std::vector<TensorView>& inputs, const AttrMap& attrs,
              ShapeBindings* bind) {
  const bool tb = TransposeB(attrs);
  static const ShapePattern kKN = ShapePattern::Parse("[K, N]");
  static const ShapePattern kNK = ShapePattern::Parse("[N, K]");
  Status st = MatchShape(op.name, "'b'", tb ? kNK : kKN,
                         inputs[static_cast<size_t>(op.InputIndex("b"))].shape, bind);
  if (!st.ok() && tb) return InvalidArgument(st.message() + " (transpose_b=true: b is [N, K])");
  return st;
}

bool GemmReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                   std::string* error) {
  const HostTensor* a = RefInput(in, "a", "gemm", error);
  const HostTensor* b = RefInput(in, "b", "gemm", error);
  if (!a || !b) return false;
  if (a->shape.size() != 2 || b->shape.size() != 2)
    return *error = "gemm: a and b must be matrices", false;
  const bool tb = AttrOr(attrs, "transpose_b", false);
  const double alpha = static_cast<float>(AttrOr(attrs, "alpha", 1.0));
  const int64_t m = a->shape[0], k = a->shape[1], n = tb ? b->shape[0] : b->shape[1];
  if ((tb ? b->shape[1] : b->shape[0]) != k) return *error = "gemm: inner dims differ", false;
  HostTensor c;
  c.dtype = a->dtype;
  c.shape = {m, n};
  c.values.assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = a->values[static_cast<size_t>(i * k + kk)];
      double* crow = c.values.data() + i * n;
      for (int64_t j = 0; j < n; ++j)
        crow[j] += av * b->values[static_cast<size_t>(tb ? j * k + kk : kk * n + j)];
    }
  }
  for (auto& v : c.values) v *= alpha;
  (*out)["c"] = std::move(c);
  return true;
}

}  // namespace

KERNELD_OP(gemm) {
  OpDef op("gemm");
  op.Doc(
        "c[M, N] = alpha * a[M, K] @ b[K, N], or alpha * a @ b^T with transpose_b (b is "
        "[N, K], the nn.Linear weight layout). a and b share one dtype; products are "
        "accumulated in float32 and rounded once to that dtype (no TF32 for float32).")
      .Input("a", kFloatingTypes, "[M, K]", "row-major")
      .Input("b", kFloatingTypes, "[...]", "[K, N], or [N, K] with transpose_b; a's dtype")
      .GenShape("[K, K]")  // N = K fits either layout
      .SameDType("a", "b")
      .Check(CheckB)
      .Output("c", ShapeOf("[M, N]", "a"), "a's dtype")
      .AttrWithDefault("transpose_b", AttrType::kBool, false, "b is [N, K]")
      .AttrWithDefault("alpha", AttrType::kFloat, 1.0, "scales the product");
  op.Reference(GemmReference);
  // The tuner's buckets: which kernel wins depends on M, N, K and b's
  // layout (the decode kernel against cuBLASLt, measured per shape).
  op.TuneBy({"M", "N", "K", "transpose_b"}, [](const KernelContext& ctx, int64_t* d) {
    const bool tb = TransposeB(ctx.attrs);
    const Shape& a = ctx.inputs[0].shape;
    const Shape& b = ctx.inputs[1].shape;
    d[0] = a.size() == 2 ? a[0] : 0;
    d[1] = b.size() == 2 ? b[tb ? 0 : 1] : 0;
    d[2] = a.size() == 2 ? a[1] : 0;
    d[3] = tb ? 1 : 0;
  });
  return op;
}

}  // namespace kerneld
