// gemm: c = alpha * a @ b (or a @ b^T), float32 accumulation.
#include <optional>
#include <string>

#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/check.h"
#include "kerneld/op.h"

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

// The decode kernel keeps M rows of a per block; larger M goes to cuBLAS.
constexpr int64_t kDecodeMaxM = 32;

constexpr int kCublasRank = 10;
constexpr int kDecodeWinsRank = 15;

// Where the decode kernel beats cuBLASLt (see the ranking note below): float32
// with b [K, N], 8 <= M <= 16, 4096 <= N <= 6144, K <= 4096.
[[maybe_unused]] std::optional<int> DecodeRankFor(const KernelContext& ctx) {
  if (ctx.inputs.size() < 2 || TransposeB(ctx.attrs)) return std::nullopt;
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  if (a.dtype != DType::kFloat32 || a.shape.size() != 2 || b.shape.size() != 2) return std::nullopt;
  const int64_t m = a.shape[0], k = b.shape[0], n = b.shape[1];
  if (m >= 8 && m <= 16 && n >= 4096 && n <= 6144 && k <= 4096) return kDecodeWinsRank;
  return std::nullopt;
}

[[maybe_unused]] std::optional<std::string> DecodeShape(const KernelContext& ctx) {
  if (ctx.inputs.empty()) return std::nullopt;
  const int64_t m = ctx.inputs[0].shape.empty() ? 0 : ctx.inputs[0].shape[0];
  if (m > kDecodeMaxM)
    return "M = " + std::to_string(m) + " > " + std::to_string(kDecodeMaxM) +
           " (the decode kernel is for small M)";
  return std::nullopt;
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
      .SameDType("a", "b")
      .Check(CheckB)
      .Output("c", ShapeOf("[M, N]", "a"), "a's dtype")
      .AttrWithDefault("transpose_b", AttrType::kBool, false, "b is [N, K]")
      .AttrWithDefault("alpha", AttrType::kFloat, 1.0, "scales the product")
      .Impl("cpu", cpu::Gemm, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  // Static ranking from measurement (bench/kernel_bench --gemm-shapes on an
  // H100, 2026-11-24, L2 flushed both clean and dirty; docs/kernels.md):
  // cuBLASLt ranks first. The hand-written decode kernel is ahead in both
  // flush methods only on float32 with b [K, N] at M 8..16 and N 4096..6144
  // (cuBLASLt's algorithm choice there: 16x4096x4096 79.6 us vs 46.7 us),
  // so it ranks first there (kDecodeWinsRank). On half types it is 3-7%
  // ahead at 1..16 x 4096 x 4096 with b [N, K] after a clean flush but
  // 2-8% behind after a dirty one, and behind on every other shape: no rule.
  op.Impl("cublas", cuda::GemmCublas,
          Requirements::Cuda(80).When("libcublasLt loads", cuda::CublasUnavailable), kCublasRank);
  op.impls.back().thread_warm_up = cuda::WarmUpCublas;
  op.Impl("cuda", cuda::GemmDecode, Requirements::Cuda(70).When("M <= 32", DecodeShape), 5);
  op.impls.back().priority_for = DecodeRankFor;
  op.impls.back().priority_doc =
      "ranks above cublas for float32 with b [K, N], 8 <= M <= 16, 4096 <= N <= 6144, K <= 4096 "
      "(measured faster there on an H100)";
#endif
  return op;
}

}  // namespace kerneld
