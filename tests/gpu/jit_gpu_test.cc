// The nvrtc backend's loading side on a real GPU: rmsnorm's cuda.cuh, compiled
// by NVRTC for this device's exact architecture, loaded with the driver API
// (cuModuleLoadData) and launched, against a float64 reference; then the
// same module from the disk cache. Exits 77 (skipped) without a GPU or NVRTC.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "jit/compiler.h"
#include "jit/cuda_driver.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc_loader.h"
#include "jit/source_tree.h"

namespace kerneld::server::jit {
namespace {

const CudaDriverApi* g_driver = nullptr;
const NvrtcApi* g_nvrtc = nullptr;

// y = x / rms(x) * (w + bias), rows of h floats, through the JIT's kernel.
std::vector<float> RunRmsNorm(const LoadedModule& mod, const std::string& kernel,
                              const std::vector<float>& x, const std::vector<float>& w,
                              int64_t rows, int h, float eps, float bias) {
  float *dx = nullptr, *dw = nullptr, *dy = nullptr;
  EXPECT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dw, w.size() * 4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dy, x.size() * 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
  std::string why;
  CudaDriverApi::Function fn = mod.Find(kernel, &why);
  EXPECT_NE(fn, nullptr) << why;
  constexpr int kN = 4;  // float packs of 16 bytes
  int units = h / kN;
  const void* px = dx;
  const void* pw = dw;
  void* py = dy;
  void* params[] = {&px, &pw, &py, &rows, &units, &eps, &bias};
  // One pack a thread (kItems 1), a row a block: the AOT plan's shape.
  const unsigned threads = static_cast<unsigned>((units + 31) / 32 * 32);
  const int r = g_driver->launch_kernel(fn, static_cast<unsigned>(rows), 1, 1, threads, 1, 1, 0,
                                        nullptr, params, nullptr);
  EXPECT_EQ(r, 0) << g_driver->ErrorName(r);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> y(x.size());
  cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  return y;
}

TEST(JitGpu, CompiledForThisDeviceRunsAndMatchesTheReference) {
  std::string why;
  const std::string arch = DeviceArch(*g_driver, 0, &why);
  ASSERT_FALSE(arch.empty()) << why;
  Compiler compiler(g_nvrtc, &SourceTree::Embedded());
  const std::string kernel = "kerneld::cuda::rmsnorm::RmsNormKernel<float, 4, 1>";
  Program prog;
  Status s = compiler.Prepare({"ops/rmsnorm/cuda.cuh", {kernel}, arch, {}}, &prog);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("jit_gpu_test." + std::to_string(getpid()));
  DiskCache cache({dir.string(), 0});
  ASSERT_TRUE(cache.Open().ok()) << cache.reason();
  auto compile = [&](CompiledModule* m) { return compiler.Compile(prog, m); };

  const int64_t rows = 37;
  const int h = 4 * 127;  // a tail: 127 packs, not a multiple of 32
  const float eps = 1e-6f, bias = 0.5f;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(rows) * h), w(static_cast<size_t>(h));
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = nd(rng);
  for (int round = 0; round < 2; ++round) {  // compiled, then from the cache
    CompiledModule compiled;
    bool hit = false;
    s = cache.GetOrCompile(prog.key, compile, &compiled, &hit);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(hit, round == 1);
    std::unique_ptr<LoadedModule> mod;
    s = LoadedModule::Load(*g_driver, 0, compiled, &mod);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const std::vector<float> y = RunRmsNorm(*mod, kernel, x, w, rows, h, eps, bias);
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < h; ++i) ss += double{x[r * h + i]} * x[r * h + i];
      const double scale = 1.0 / std::sqrt(ss / h + eps);
      for (int i = 0; i < h; ++i) {
        const double want = x[r * h + i] * scale * (double{w[i]} + bias);
        worst = std::max(worst, std::abs(y[r * h + i] - want) / (1e-5 + 1e-5 * std::abs(want)));
      }
    }
    EXPECT_LE(worst, 1.0) << "round " << round;
    std::string find_why;
    EXPECT_EQ(mod->Find("kerneld::cuda::rmsnorm::RmsNormKernel<float, 4, 2>", &find_why), nullptr);
    EXPECT_NE(find_why.find("not compiled with"), std::string::npos) << find_why;
  }
  std::filesystem::remove_all(dir);
}

// The width compiled in (RmsNormKernel's kUnits, as the plans name it)
// computes what the run-time width does, bit for bit: the same arithmetic,
// with constant bounds. 127 packs: a tail of a warp.
TEST(JitGpu, CompiledInWidthMatchesTheRunTimeWidth) {
  const std::string ns = "kerneld::cuda::rmsnorm::RmsNormKernel<float, 4, 1";
  const std::string runtime = ns + ">", fixed = ns + ", 127>";
  std::string why;
  const std::string arch = DeviceArch(*g_driver, 0, &why);
  ASSERT_FALSE(arch.empty()) << why;
  Compiler compiler(g_nvrtc, &SourceTree::Embedded());
  Program prog;
  ASSERT_TRUE(compiler.Prepare({"ops/rmsnorm/cuda.cuh", {runtime, fixed}, arch, {}}, &prog).ok());
  CompiledModule compiled;
  ASSERT_TRUE(compiler.Compile(prog, &compiled).ok());
  std::unique_ptr<LoadedModule> mod;
  ASSERT_TRUE(LoadedModule::Load(*g_driver, 0, compiled, &mod).ok());
  const int64_t rows = 9;
  const int h = 4 * 127;
  std::mt19937 rng(29);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(rows) * h), w(static_cast<size_t>(h));
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = nd(rng);
  EXPECT_EQ(RunRmsNorm(*mod, runtime, x, w, rows, h, 1e-6f, 0.0f),
            RunRmsNorm(*mod, fixed, x, w, rows, h, 1e-6f, 0.0f));
}

// A CUBIN for another major architecture does not load: a clear error.
TEST(JitGpu, ACubinForAnotherArchIsRefused) {
  std::string why;
  const std::string arch = DeviceArch(*g_driver, 0, &why);
  const std::string other = arch.rfind("sm_8", 0) == 0 ? "sm_90" : "sm_80";
  Compiler compiler(g_nvrtc, &SourceTree::Embedded());
  Program prog;
  ASSERT_TRUE(compiler
                  .Prepare({"ops/rmsnorm/cuda.cuh",
                            {"kerneld::cuda::rmsnorm::RmsNormKernel<float, 4, 1>"},
                            other,
                            {}},
                           &prog)
                  .ok());
  CompiledModule compiled;
  ASSERT_TRUE(compiler.Compile(prog, &compiled).ok());
  std::unique_ptr<LoadedModule> mod;
  Status s = LoadedModule::Load(*g_driver, 0, compiled, &mod);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("cuModuleLoadData"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kerneld::server::jit

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using namespace kerneld::server::jit;
  std::string why;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  g_driver = LoadCudaDriver(&why);
  if (g_driver == nullptr) {
    std::printf("SKIP: %s\n", why.c_str());
    return 77;
  }
  g_nvrtc = LoadNvrtc("", &why);
  if (g_nvrtc == nullptr) {
    std::printf("SKIP: %s\n", why.c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
