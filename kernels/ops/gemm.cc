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
  Status st = MatchShape(op.name, "'b'", tb ? kNK : kKN, inputs[static_cast<size_t>(op.InputIndex("b"))].shape,
                         bind);
  if (!st.ok() && tb) return InvalidArgument(st.message() + " (transpose_b=true: b is [N, K])");
  return st;
}

// The decode kernel keeps M rows of a per block; larger M goes to cuBLAS.
constexpr int64_t kDecodeMaxM = 32;

std::optional<std::string> DecodeShape(const KernelContext& ctx) {
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
  op.Doc("c[M, N] = alpha * a[M, K] @ b[K, N], or alpha * a @ b^T with transpose_b (b is "
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
  // Static ranking from measurement (bench/kernel_bench --flush-l2 on an
  // H100, 2026-11-23; docs/kernels.md): cuBLASLt beats the hand-written
  // decode kernel on every decode shape measured but one (16x4096x4096 bf16:
  // 22 us vs 33 us), so it ranks first; the decode kernel runs when asked
  // for by name (backend "cuda") or where cuBLASLt cannot load. The one:
  // float32 16x4096x4096 with b [K, N] (decode 58 us, cuBLASLt 89 us), while
  // M = 1 and 32 and K or N = 14336 go the other way; too narrow for a rule
  // (ImplDef::priority_for could carry one), it is left to measured tuning.
  op.Impl("cublas", cuda::GemmCublas,
          Requirements::Cuda(80).When("libcublasLt loads", cuda::CublasUnavailable), 10);
  op.Impl("cuda", cuda::GemmDecode, Requirements::Cuda(70).When("M <= 32", DecodeShape), 5);
#endif
  return op;
}

}  // namespace kerneld
