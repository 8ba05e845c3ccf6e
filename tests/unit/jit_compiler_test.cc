// NVRTC really compiles the op headers the AOT build compiles (no GPU
// needed). Skips, saying why, where libnvrtc is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "jit/compiler.h"
#include "jit/nvrtc_loader.h"
#include "jit/source_tree.h"

namespace kerneld::server::jit {
namespace {

const NvrtcApi* Nvrtc() {
  std::string why;
  const NvrtcApi* api = LoadNvrtc("", &why);
  if (api == nullptr) std::fprintf(stderr, "%s\n", why.c_str());
  return api;
}

#define REQUIRE_NVRTC(api)       \
  const NvrtcApi* api = Nvrtc(); \
  if (api == nullptr) GTEST_SKIP() << "libnvrtc not found (see above)"

TEST(JitLoader, MissingLibraryGivesAReason) {
  std::string why;
  EXPECT_EQ(LoadNvrtc("/nonexistent/libnvrtc.so.99", &why), nullptr);
  EXPECT_EQ(why.rfind("libnvrtc not found: ", 0), 0u) << why;
  EXPECT_NE(why.find("/nonexistent/libnvrtc.so.99"), std::string::npos) << why;
}

TEST(JitLoader, LibraryWithoutNvrtcSymbolsIsRefused) {
  std::string why;
  EXPECT_EQ(LoadNvrtc("libz.so.1", &why), nullptr);
  EXPECT_NE(why.find("lacks nvrtcVersion"), std::string::npos) << why;
}

TEST(JitLoader, LoadsAndFindsTheToolkitHeaders) {
  REQUIRE_NVRTC(api);
  EXPECT_GE(api->major, 11);
  EXPECT_FALSE(api->library.empty());
  EXPECT_FALSE(api->toolkit_include.empty()) << "no cuda_runtime.h near " << api->library;
  EXPECT_TRUE(api->SupportsArch(90));
  EXPECT_FALSE(api->SupportsArch(12));
  std::string why;
  EXPECT_EQ(LoadNvrtc("", &why), api) << "loaded once per process";
}

TEST(JitCompiler, ArchNames) {
  EXPECT_EQ(ArchComputeCapability("sm_90"), 90);
  EXPECT_EQ(ArchComputeCapability("sm_90a"), 90);
  EXPECT_EQ(ArchComputeCapability("sm_100f"), 100);
  EXPECT_EQ(ArchComputeCapability("compute_90"), -1);
  EXPECT_EQ(ArchComputeCapability("sm_"), -1);
  EXPECT_EQ(ArchComputeCapability("sm_90ab"), -1);
  EXPECT_EQ(ArchComputeCapability("sm_9"), -1);
}

TEST(JitCompiler, EmbeddedTreeHoldsTheOpHeaders) {
  const SourceTree& t = SourceTree::Embedded();
  std::string text;
  ASSERT_TRUE(t.Read("ops/rmsnorm/cuda.cuh", &text));
  EXPECT_NE(text.find("RmsNormKernel"), std::string::npos);
  EXPECT_TRUE(t.Read("common/cuda/rows.cuh", &text));
  EXPECT_FALSE(t.Read("../CMakeLists.txt", &text));
  EXPECT_FALSE(t.Read("ops/nope/cuda.cuh", &text));
}

TEST(JitCompiler, ClosureHoldsEveryProjectHeader) {
  SourceClosure c;
  ASSERT_TRUE(CollectSources(SourceTree::Embedded(), "ops/rmsnorm/cuda.cuh", &c).ok());
  for (const char* h : {"ops/rmsnorm/cuda.cuh", "common/cuda/rows.cuh", "common/cuda/vec.cuh",
                        "common/cuda/block_reduce.cuh", "common/cuda/launch.cuh", "cstdint"})
    EXPECT_EQ(c.headers.count(h), 1u) << h;
  EXPECT_NE(std::find(c.toolkit.begin(), c.toolkit.end(), "cuda_runtime.h"), c.toolkit.end());
  Status s = CollectSources(SourceTree::Embedded(), "ops/nope/cuda.cuh", &c);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

// rmsnorm's cuda.cuh, the file nvcc compiles for the cuda backend, through
// NVRTC for sm_90: a CUBIN (an ELF file) with the kernel's symbol.
TEST(JitCompiler, CompilesRmsNormForSm90) {
  REQUIRE_NVRTC(api);
  Compiler compiler(api, &SourceTree::Embedded());
  KernelSpec spec;
  spec.header = "ops/rmsnorm/cuda.cuh";
  // The width compiled in (the last template argument, 1024 packs), as the
  // plans name it.
  spec.kernels = {"kerneld::cuda::rmsnorm::RmsNormKernel<__half, 8, 2, 1024>",
                  "kerneld::cuda::rmsnorm::RmsNormRowKernel<__nv_bfloat16, 8, 256, 2, 4, "
                  "kerneld::cuda::rmsnorm::RowWalk::kPersistent>"};
  spec.arch = "sm_90";
  Program prog;
  ASSERT_TRUE(compiler.Prepare(spec, &prog).ok());
  EXPECT_EQ(prog.key.size(), 64u);
  CompiledModule mod;
  std::string log;
  Status s = compiler.Compile(prog, &mod, &log);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << log;
  ASSERT_GT(mod.cubin.size(), 4u);
  EXPECT_EQ(mod.cubin.substr(0, 4), std::string("\x7f"
                                                "ELF"));
  EXPECT_EQ(mod.Symbol(spec.kernels[0]),
            "_ZN7kerneld4cuda7rmsnorm13RmsNormKernelI6__halfLi8ELi2ELx1024EEEvPKT_S6_PS4_xiff");
  EXPECT_FALSE(mod.Symbol(spec.kernels[1]).empty());
  EXPECT_EQ(mod.Symbol("nope"), "");
}

TEST(JitCompiler, BadInputsAreClearErrors) {
  REQUIRE_NVRTC(api);
  Compiler compiler(api, &SourceTree::Embedded());
  KernelSpec spec{
      "ops/rmsnorm/cuda.cuh", {"kerneld::cuda::rmsnorm::RmsNormKernel<float, 1, 1>"}, "sm_90", {}};
  Program prog;
  spec.arch = "compute_90";
  EXPECT_EQ(compiler.Prepare(spec, &prog).code(), StatusCode::kInvalidArgument);
  spec.arch = "sm_12";
  EXPECT_EQ(compiler.Prepare(spec, &prog).code(), StatusCode::kInvalidArgument);
  spec.arch = "sm_90";
  spec.kernels = {};
  EXPECT_EQ(compiler.Prepare(spec, &prog).code(), StatusCode::kInvalidArgument);
  // A template argument the kernel cannot take: NVRTC's own message.
  spec.kernels = {"kerneld::cuda::rmsnorm::RmsNormKernel<float, 1>"};
  ASSERT_TRUE(compiler.Prepare(spec, &prog).ok());
  CompiledModule mod;
  Status s = compiler.Compile(prog, &mod);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("could not compile"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("NVRTC_ERROR_COMPILATION"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kerneld::server::jit
