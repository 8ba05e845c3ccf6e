// NVRTC compiles, from the headers the AOT build compiles, every kernel the
// ops' JIT plans (kernels/ops/<op>/jit.cu) can name: each JIT op's cuda.cuh
// is NVRTC-clean (host code behind #ifndef __CUDACC_RTC__) and the name
// expressions' spelling (namespaces, template arguments) resolves. No GPU
// needed; skips where libnvrtc is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
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

// Names as the plans spell them: the row width (in packs), the vocabulary,
// head_dim / rot_dim / head counts compiled in as the last template
// arguments (common/cuda/width.cuh); some with the run-time width (0, the
// AOT instantiation) too.
std::vector<Case> Cases() {
  const std::string rms = "kerneld::cuda::rmsnorm::", fused = "kerneld::cuda::fused_add_rmsnorm::",
                    ln = "kerneld::cuda::layernorm::", act = "kerneld::cuda::ActAndMulKernel",
                    sm = "kerneld::cuda::softmax::", rope = "kerneld::cuda::rope::";
  return {
      {"ops/rmsnorm/cuda.cuh",
       {rms + "RmsNormKernel<__half, 8, 1, 512>", rms + "RmsNormKernel<float, 1, 8, 8191>",
        rms + "RmsNormKernel<__half, 8, 1>", rms + "RmsNormWideKernel<float, 4, 16384>",
        rms + "RmsNormRowKernel<__nv_bfloat16, 8, 256, 2, 4, " + rms + "RowWalk::kPersistent, 512>",
        rms + "RmsNormRowKernel<__half, 8, 512, 2, 2, " + rms + "RowWalk::kWeightEarly, 1024>",
        rms + "RmsNormRowKernel<float, 4, 256, 4, 4, " + rms + "RowWalk::kWeightLate, 1000>",
        rms + "RmsNormSplitKernel<__nv_bfloat16, 8, 1, 2048, 256>",
        rms + "RmsNormSplitKernel<__half, 1, 8, 32767, 2048>"}},
      {"ops/fused_add_rmsnorm/cuda.cuh",
       {fused + "FusedAddRmsNormKernel<__half, 8, 2, 1024>",
        fused + "FusedAddRmsNormKernel<float, 1, 8, 4097>",
        fused + "FusedAddRmsNormWideKernel<__nv_bfloat16, 8, 8192>",
        fused + "FusedAddRmsNormSplitKernel<__half, 8, 2, 4096, 1024>",
        fused + "FusedAddRmsNormSplitKernel<float, 1, 4, 8193, 2049>"}},
      {"ops/layernorm/cuda.cuh",
       {ln + "LayerNormKernel<__half, 8, 1, 512, 4, 512>",
        ln + "LayerNormKernel<float, 4, 4, 1024, 1, 4000>",
        ln + "LayerNormWideKernel<__nv_bfloat16, 8, 8192>",
        ln + "LayerNormSplitKernel<__half, 8, 1, 2048, 128>",
        ln + "LayerNormSplitKernel<float, 1, 8, 16385, 4097>"}},
      {"ops/silu_and_mul/cuda.cuh",
       {act + "<__half, 8, kerneld::act::Silu, 1792>", act + "<__half, 8, kerneld::act::Silu>"}},
      {"ops/gelu_and_mul/cuda.cuh",
       {act + "<__nv_bfloat16, 8, kerneld::cuda::gelu_and_mul::GeluErf, 3584>",
        act + "<float, 4, kerneld::act::Gelu, 7168>"}},
      {"ops/gelu_tanh_and_mul/cuda.cuh", {act + "<float, 1, kerneld::act::GeluTanh, 14335>"}},
      {"ops/softmax/cuda.cuh",
       {sm + "SoftmaxRegKernel<__half, float, 4, 2, 4096>",
        sm + "SoftmaxRegKernel<float, float, 1, 32, 50257>",
        sm + "SoftmaxStreamKernel<__nv_bfloat16, float, 4, 256000>",
        sm + "SoftmaxClusterKernel<__nv_bfloat16, float, 4, 8, 128256, 2004>"}},
      {"ops/rope/cuda.cuh",
       {rope + "RopeKernel<__half, long long, 4, true, 128, 128, 32, 8>",
        rope + "RopeKernel<__nv_bfloat16, int, 4, false, 128, 64, 8, 1>",
        rope + "RopeKernel<float, int, 1, true, 80, 80, 16, 16>",
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

// What sets a kernel's structure is in its key: the same kernel at another
// width, dtype or plan is another program, and the same request is the same
// key again (docs/jit.md, "How a key is made").
TEST(JitOps, KeysFollowTheTemplateArguments) {
  std::string why;
  const NvrtcApi* api = LoadNvrtc("", &why);
  if (api == nullptr) GTEST_SKIP() << why;
  Compiler compiler(api, &SourceTree::Default());
  const std::string rms = "kerneld::cuda::rmsnorm::RmsNormKernel";
  auto key = [&](const std::string& header, const std::string& kernel) {
    Program prog;
    EXPECT_TRUE(compiler.Prepare({header, {kernel}, "sm_90", {}}, &prog).ok()) << kernel;
    return prog.key;
  };
  const std::string base = key("ops/rmsnorm/cuda.cuh", rms + "<__half, 8, 1, 512>");
  EXPECT_EQ(base, key("ops/rmsnorm/cuda.cuh", rms + "<__half, 8, 1, 512>"));
  std::set<std::string> keys = {base};
  for (const std::string& k : {rms + "<__half, 8, 1, 1024>",        // width
                               rms + "<__half, 8, 1>",              // width at run time
                               rms + "<__nv_bfloat16, 8, 1, 512>",  // dtype
                               rms + "<__half, 1, 8, 4096>",        // vector width
                               rms + "<__half, 8, 2, 512>"})        // items a thread
    EXPECT_TRUE(keys.insert(key("ops/rmsnorm/cuda.cuh", k)).second) << k;
  const std::string sm = "kerneld::cuda::softmax::SoftmaxClusterKernel<__half, float, 4, 8, ";
  EXPECT_NE(key("ops/softmax/cuda.cuh", sm + "128256, 2004>"),
            key("ops/softmax/cuda.cuh", sm + "128256, 4008>"));  // the split's chunk
  const std::string rope = "kerneld::cuda::rope::RopeKernel<__half, int, 4, true, ";
  EXPECT_NE(key("ops/rope/cuda.cuh", rope + "128, 128, 32, 8>"),
            key("ops/rope/cuda.cuh", rope + "128, 64, 32, 8>"));  // rot_dim
}

}  // namespace
}  // namespace kerneld::server::jit
