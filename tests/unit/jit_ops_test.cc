// NVRTC compiles, from the headers the AOT build compiles, every kernel the
// ops' JIT plans (kernels/ops/<op>/jit.cu) can name: each JIT op's cuda.cuh
// is NVRTC-clean (host code behind #ifndef __CUDACC_RTC__) and the name
// expressions' spelling (namespaces, template arguments) resolves. No GPU
// needed; skips where libnvrtc is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "jit/compiler.h"
#include "jit/nvrtc_loader.h"
#include "jit/source_tree.h"

namespace kerneld::server::jit {
namespace {

struct Case {
  const char* header;
  std::vector<std::string> kernels;
};

std::vector<Case> Cases() {
  const std::string rms = "kerneld::cuda::rmsnorm::", fused = "kerneld::cuda::fused_add_rmsnorm::",
                    ln = "kerneld::cuda::layernorm::", act = "kerneld::cuda::ActAndMulKernel",
                    sm = "kerneld::cuda::softmax::", rope = "kerneld::cuda::rope::";
  return {
      {"ops/rmsnorm/cuda.cuh",
       {rms + "RmsNormKernel<__half, 8, 1>", rms + "RmsNormKernel<float, 1, 8>",
        rms + "RmsNormWideKernel<float, 4>",
        rms + "RmsNormRowKernel<__nv_bfloat16, 8, 256, 2, 4, " + rms + "RowWalk::kPersistent>",
        rms + "RmsNormRowKernel<__half, 8, 512, 2, 2, " + rms + "RowWalk::kWeightEarly>",
        rms + "RmsNormRowKernel<float, 4, 256, 4, 4, " + rms + "RowWalk::kWeightLate>"}},
      {"ops/fused_add_rmsnorm/cuda.cuh",
       {fused + "FusedAddRmsNormKernel<__half, 8, 2>", fused + "FusedAddRmsNormKernel<float, 1, 8>",
        fused + "FusedAddRmsNormWideKernel<__nv_bfloat16, 8>"}},
      {"ops/layernorm/cuda.cuh",
       {ln + "LayerNormKernel<__half, 8, 1, 512, 4>", ln + "LayerNormKernel<float, 4, 4, 1024, 1>",
        ln + "LayerNormWideKernel<__nv_bfloat16, 8>"}},
      {"ops/silu_and_mul/cuda.cuh", {act + "<__half, 8, kerneld::act::Silu>"}},
      {"ops/gelu_and_mul/cuda.cuh",
       {act + "<__nv_bfloat16, 8, kerneld::cuda::gelu_and_mul::GeluErf>",
        act + "<float, 4, kerneld::act::Gelu>"}},
      {"ops/gelu_tanh_and_mul/cuda.cuh", {act + "<float, 1, kerneld::act::GeluTanh>"}},
      {"ops/softmax/cuda.cuh",
       {sm + "SoftmaxRegKernel<__half, float, 4, 2>", sm + "SoftmaxRegKernel<float, float, 1, 32>",
        sm + "SoftmaxStreamKernel<__nv_bfloat16, float, 4>",
        sm + "SoftmaxClusterKernel<__nv_bfloat16, float, 4, 8>"}},
      {"ops/rope/cuda.cuh",
       {rope + "RopeKernel<__half, long long, 4, true>",
        rope + "RopeKernel<__nv_bfloat16, int, 4, false>", rope + "RopeKernel<float, int, 1, true>",
        rope + "RopeKernel<__half, long long, 1, false>"}},
  };
}

TEST(JitOps, EveryPlannedKernelCompilesForSm90) {
  std::string why;
  const NvrtcApi* api = LoadNvrtc("", &why);
  if (api == nullptr) GTEST_SKIP() << why;
  Compiler compiler(api, &SourceTree::Default());
  for (const Case& c : Cases()) {
    KernelSpec spec{c.header, c.kernels, "sm_90", {}};
    Program prog;
    ASSERT_TRUE(compiler.Prepare(spec, &prog).ok()) << c.header;
    CompiledModule mod;
    std::string log;
    Status s = compiler.Compile(prog, &mod, &log);
    ASSERT_TRUE(s.ok()) << c.header << ": " << s.message() << "\n" << log;
    EXPECT_FALSE(mod.cubin.empty()) << c.header;
    for (const auto& k : c.kernels) EXPECT_FALSE(mod.Symbol(k).empty()) << k;
  }
}

}  // namespace
}  // namespace kerneld::server::jit
