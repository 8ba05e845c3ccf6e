// User kernels compile with NVRTC for a named arch without a GPU: the
// resources come from ptxas, a compile error carries NVRTC's log (bounded),
// a wrong signature says what it must be, and includes of the daemon's
// files are refused before NVRTC runs. Skips where libnvrtc is missing.
#include <gtest/gtest.h>

#include <cstdio>

#include "sandbox/user_compiler.h"

namespace kerneld::server::sandbox {
namespace {

const jit::NvrtcApi* Nvrtc() {
  std::string why;
  const jit::NvrtcApi* api = jit::LoadNvrtc("", &why);
  if (api == nullptr) std::fprintf(stderr, "%s\n", why.c_str());
  return api;
}
#define REQUIRE_NVRTC(api)            \
  const jit::NvrtcApi* api = Nvrtc(); \
  if (api == nullptr) GTEST_SKIP() << "libnvrtc not found (see above)"

constexpr const char* kScale = R"(
extern "C" __global__ void my_scale(const float* __restrict__ x, float* __restrict__ y,
                                    long long n, float factor) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * factor;
}
)";

UserKernelSpec Spec(const std::string& entry = "my_scale") {
  v1::RegisterKernelRequest r;
  r.set_name("my_scale");
  r.set_cuda_source("x");
  r.set_entry(entry);
  auto* x = r.add_inputs();
  x->set_name("x");
  x->add_dtypes(v1::DTYPE_FLOAT32);
  if (entry.find("<T>") != std::string::npos) x->add_dtypes(v1::DTYPE_FLOAT16);
  x->set_shape("[n]");
  r.add_outputs()->set_name("y");
  r.mutable_outputs(0)->set_shape("same as 'x'");
  auto* f = r.add_attrs();
  f->set_name("factor");
  f->set_type("float");
  f->set_required(true);
  r.set_launch("grid = ceil(n / 256), block = 256");
  UserKernelSpec s;
  EXPECT_TRUE(ParseKernelSpec(r, &s).ok());
  return s;
}

TEST(UserKernelCompile, CompilesWithoutAGpuAndReportsResources) {
  REQUIRE_NVRTC(api);
  CompiledUserKernel c;
  Status st = CompileUserKernel(*api, nullptr, Spec(), kScale, "sm_90", &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(c.module.cubin.empty());
  EXPECT_EQ(c.module.Symbol("my_scale"), "my_scale");
  ASSERT_EQ(c.resources.size(), 1u) << c.log;
  EXPECT_EQ(c.resources[0].function(), "my_scale");
  EXPECT_EQ(c.resources[0].arch(), "sm_90");
  EXPECT_GT(c.resources[0].registers(), 0) << c.log;
  EXPECT_EQ(c.resources[0].spill_store_bytes(), 0);
  EXPECT_EQ(c.key.size(), 64u);
}

TEST(UserKernelCompile, TemplateEntryPerDType) {
  REQUIRE_NVRTC(api);
  const std::string src = std::string("#include <cuda_fp16.h>\n") + R"(
template <typename T>
__global__ void my_scale(const T* x, T* y, long long n, float factor) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  __shared__ float pad[64];
  pad[threadIdx.x % 64] = factor;
  if (i < n) y[i] = T(float(x[i]) * pad[0]);
}
)";
  CompiledUserKernel c;
  Status st = CompileUserKernel(*api, nullptr, Spec("my_scale<T>"), src, "sm_90", &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(c.module.Symbol("my_scale<float>").empty());
  EXPECT_FALSE(c.module.Symbol("my_scale<__half>").empty());
  ASSERT_EQ(c.resources.size(), 2u) << c.log;
  for (const auto& r : c.resources) EXPECT_EQ(r.shared_bytes(), 256) << r.function();
}

TEST(UserKernelCompile, ErrorCarriesTheLogBounded) {
  REQUIRE_NVRTC(api);
  std::string src = kScale;
  src += "\n__global__ void broken() { undefined_thing(); }\n";
  // Errors of long names: NVRTC stops at 100 errors, so each is long.
  const std::string long_name(400, 'q');
  for (int i = 0; i < 90; ++i)
    src += "__global__ void b" + std::to_string(i) + "() { " + long_name + std::to_string(i) +
           "(); }\n";
  CompiledUserKernel c;
  Status st = CompileUserKernel(*api, nullptr, Spec(), src, "sm_90", &c);
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("undefined_thing"), std::string::npos) << st.message();
  EXPECT_LE(st.message().size(), kMaxStatusMessage);
  EXPECT_LE(c.log.size(), kMaxLogBytes + 64);
  EXPECT_NE(c.log.find("more bytes"), std::string::npos);
}

TEST(UserKernelCompile, WrongSignatureSaysWhatItMustBe) {
  REQUIRE_NVRTC(api);
  const char* src =
      "extern \"C\" __global__ void my_scale(const float* x, float* y, int n, float f) {}\n";
  CompiledUserKernel c;
  Status st = CompileUserKernel(*api, nullptr, Spec(), src, "sm_90", &c);
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("parameter 3 of my_scale must be int64_t n"), std::string::npos)
      << st.message();
  const char* few = "extern \"C\" __global__ void my_scale(const float* x, float* y) {}\n";
  st = CompileUserKernel(*api, nullptr, Spec(), few, "sm_90", &c);
  EXPECT_NE(st.message().find("must be declared void(const float* x, float* y, int64_t n, float "
                              "factor)"),
            std::string::npos)
      << st.message();
  // An entry the source does not define.
  st = CompileUserKernel(*api, nullptr, Spec("other"), kScale, "sm_90", &c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

TEST(UserKernelCompile, IncludesOfTheDaemonsFilesAreRefused) {
  for (const char* src :
       {"#include \"/etc/passwd\"\n", "#include </etc/passwd>\n", "#  include <../../etc/passwd>\n",
        "#define P </etc/passwd>\n#include P\n", "#inc\\\nlude \"x\"\n", "#embed \"/etc/passwd\"\n",
        "#include <cuda_fp16.h> junk\n"}) {
    Status st = CheckIncludes(src);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << src;
  }
  EXPECT_TRUE(CheckIncludes("#include <cuda_fp16.h>\n#include <cuda/std/cstdint>  // ok\n").ok());
}

TEST(UserKernelCompile, BadArchIsRefused) {
  REQUIRE_NVRTC(api);
  CompiledUserKernel c;
  EXPECT_EQ(CompileUserKernel(*api, nullptr, Spec(), kScale, "sm_12", &c).code(),
            StatusCode::kInvalidArgument);
}

TEST(UserKernelCompile, PtxasInfoParsing) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kIfEvPKT_' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z1kIfEvPKT_\n"
      "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]\n";
  auto r = ParsePtxasInfo(log, "sm_90", {{"k<float>", "_Z1kIfEvPKT_"}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].function(), "k<float>");
  EXPECT_EQ(r[0].registers(), 40);
  EXPECT_EQ(r[0].shared_bytes(), 2048);
  EXPECT_EQ(r[0].stack_bytes(), 16);
  EXPECT_EQ(r[0].spill_store_bytes(), 8);
  EXPECT_EQ(r[0].spill_load_bytes(), 4);
  EXPECT_EQ(r[0].constant_bytes(), 368);
}

}  // namespace
}  // namespace kerneld::server::sandbox
