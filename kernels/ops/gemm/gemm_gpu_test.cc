// gemm on CUDA: the hand-written decode kernels (backend "cuda", M <= 32:
// tensor cores for half types, FMA for float32 and for half types before
// compute capability 8.0) and cuBLASLt (backend "cublas") against the CPU
// implementation and the float64 reference: dtypes x M x odd N / K x
// transpose_b x alpha x offsets that break 16-byte alignment, the decode
// benchmark shapes, the M limit of the decode kernel, and bit-identical
// repeat runs.
//
// Tolerance: the dtype's rtol/atol with atol scaled by sqrt(K) (a float32
// sum of K products carries a rounding error growing like sqrt(K)).
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <tuple>
#include <vector>

#include "gpu_util.h"
#include "ops/gemm/cublas.h"
#include "ops/gemm/gemm_decode.cuh"

namespace kerneld::testing {
namespace {

HostTensors GemmInputs(DType dt, int64_t m, int64_t n, int64_t k, bool tb, std::mt19937_64& rng) {
  return {
      {"a", Random(dt, {m, k}, rng, -1, 1)},
      {"b", Random(dt, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, rng, -1, 1)}};
}

void ExpectClose(const HostTensors& in, const AttrMap& attrs, const OpRun& gpu, DType dt,
                 int64_t k) {
  double rtol, atol;
  Tolerance(dt, &rtol, &atol);
  atol *= std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  EXPECT_EQ(CheckAgainstReference("gemm", in, attrs, gpu.outputs, rtol, atol), "");
  OpRun cpu = RunOnCpu("gemm", in, attrs);
  ASSERT_TRUE(cpu.status.ok());
  auto c = Compare(gpu.outputs.at("c").values, cpu.outputs["c"].values, rtol, atol);
  EXPECT_EQ(c.mismatches, 0) << "vs cpu: max abs err " << c.max_abs_err;
}

struct Dims {
  int64_t n, k;
};

class GemmGpuTest : public ::testing::TestWithParam<
                        std::tuple<std::string, DType, int64_t, Dims, bool, double, bool>> {};

TEST_P(GemmGpuTest, MatchesCpuAndReference) {
  auto [backend, dtype, m, d, tb, alpha, misaligned] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(m * 1009 + d.n * 31 + d.k));
  HostTensors in = GemmInputs(dtype, m, d.n, d.k, tb, rng);
  AttrMap attrs = {{"transpose_b", tb}, {"alpha", alpha}};
  // One element of offset: aligned for the element type, not for 16 bytes.
  OpRun gpu = RunOnCuda("gemm", in, attrs, backend, "", misaligned ? ItemSize(dtype) : 0);
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  ExpectClose(in, attrs, gpu, dtype, d.k);
}

std::string GemmName(const ::testing::TestParamInfo<GemmGpuTest::ParamType>& info) {
  const auto& [backend, dt, m, d, tb, alpha, mis] = info.param;
  return backend + "_" + std::string(DTypeName(dt)) + "_m" + std::to_string(m) + "_n" +
         std::to_string(d.n) + "_k" + std::to_string(d.k) + (tb ? "_bT" : "_b") +
         (alpha == 1.0 ? "" : "_alpha") + (mis ? "_misaligned" : "");
}

// The decode kernel: M up to 32 (one and two row tiles), N and K with tails
// of every kind, shapes that split K and shapes that do not. K % 8 == 0
// (and N % 8 == 0 for b [K, N]) with aligned buffers takes the pipelined
// kernel: {136, 1032} splits K five ways with a last chunk of 8 k (summed
// by a second kernel), {2056, 1032} two ways (summed in a cluster), {8456,
// 264} takes its wide (64-column) tiles with a column tail, {40, 8} is one
// partial chunk; the other dims and the misaligned runs take the
// register-window kernel.
INSTANTIATE_TEST_SUITE_P(
    Decode, GemmGpuTest,
    ::testing::Combine(::testing::Values("cuda"),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{3}, int64_t{16}, int64_t{17},
                                         int64_t{32}),
                       ::testing::Values(Dims{1, 1}, Dims{127, 65}, Dims{4097, 129}, Dims{31, 1023},
                                         Dims{256, 5000}, Dims{136, 1032}, Dims{2056, 1032},
                                         Dims{8456, 264}, Dims{40, 8}),
                       ::testing::Bool(), ::testing::Values(1.0, -0.5), ::testing::Bool()),
    GemmName);

// cuBLASLt: decode and larger M, odd shapes.
INSTANTIATE_TEST_SUITE_P(
    Cublas, GemmGpuTest,
    ::testing::Combine(::testing::Values("cublas"),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{16}, int64_t{33}, int64_t{200}),
                       ::testing::Values(Dims{1, 1}, Dims{127, 65}, Dims{4097, 129},
                                         Dims{31, 1023}),
                       ::testing::Bool(), ::testing::Values(1.0, -0.5), ::testing::Bool()),
    GemmName);

TEST(GemmGpu, DecodeBenchmarkShapes) {
  // 16 x 4096 x 4096 (both layouts) and 1 / 32 rows, as the benchmark runs them.
  const std::pair<int64_t, bool> shapes[] = {{16, false}, {16, true}, {1, true}, {32, true}};
  for (const auto& [m, tb] : shapes) {
    for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      std::mt19937_64 rng(static_cast<uint64_t>(m + tb));
      HostTensors in = GemmInputs(dt, m, 4096, 4096, tb, rng);
      AttrMap attrs = {{"transpose_b", tb}};
      for (const char* backend : {"cuda", "cublas"}) {
        SCOPED_TRACE(std::string(backend) + " " + std::string(DTypeName(dt)) +
                     " m=" + std::to_string(m) + (tb ? " transpose_b" : ""));
        OpRun gpu = RunOnCuda("gemm", in, attrs, backend);
        ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
        ExpectClose(in, attrs, gpu, dt, 4096);
      }
    }
  }
}

// The decode impl picks its float16 / bfloat16 kernel by compute capability
// (tensor cores from 8.0, FMA before). This runs it as if on a 7.5 device to
// cover the FMA kernel for half types on the machine at hand.
OpRun RunDecodeAsOlderGpu(const HostTensors& in, const AttrMap& attrs) {
  DeviceInfo older = GpuInfo();
  older.compute_capability = 75;
  CudaTarget gpu(/*misalign=*/0, older);
  return RunOp("gemm", "cuda", in, attrs, gpu);
}

TEST(GemmGpu, FmaKernelForHalfTypesOnOlderGpus) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (auto [m, n, k, tb] : {std::tuple<int64_t, int64_t, int64_t, bool>{16, 4096, 4096, false},
                               std::tuple<int64_t, int64_t, int64_t, bool>{16, 4096, 4096, true},
                               std::tuple<int64_t, int64_t, int64_t, bool>{3, 127, 65, false},
                               std::tuple<int64_t, int64_t, int64_t, bool>{32, 4097, 129, true}}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " " + std::to_string(m) + "x" + std::to_string(n) +
                   "x" + std::to_string(k) + (tb ? " transpose_b" : ""));
      std::mt19937_64 rng(static_cast<uint64_t>(m * n + k));
      HostTensors in = GemmInputs(dt, m, n, k, tb, rng);
      AttrMap attrs = {{"transpose_b", tb}, {"alpha", 0.5}};
      OpRun gpu = RunDecodeAsOlderGpu(in, attrs);
      ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
      ExpectClose(in, attrs, gpu, dt, k);
    }
  }
}

TEST(GemmGpu, DecodeKernelIsDeterministic) {
  // One split, two (N = 2056: a cluster) and five (N = 136) splits of K,
  // both layouts.
  for (auto [n, tb] : {std::pair<int64_t, bool>{4096, false},
                       {4096, true},
                       {2056, false},
                       {2056, true},
                       {136, false},
                       {136, true}}) {
    SCOPED_TRACE("n=" + std::to_string(n) + (tb ? " transpose_b" : ""));
    std::mt19937_64 rng(2);
    HostTensors in = GemmInputs(DType::kBFloat16, 16, n, 4096, tb, rng);
    AttrMap attrs = {{"transpose_b", tb}};
    OpRun r1 = RunOnCuda("gemm", in, attrs, "cuda");
    OpRun r2 = RunOnCuda("gemm", in, attrs, "cuda");
    ASSERT_TRUE(r1.status.ok() && r2.status.ok());
    EXPECT_EQ(r1.outputs["c"].values, r2.outputs["c"].values);
  }
}

TEST(GemmGpu, ClusterSumEqualsWorkspaceSumBitForBit) {
  // Two splits of K (N = 2056 on a 132-SM H100) are summed inside a
  // two-block cluster on compute capability >= 9.0; the workspace path must
  // give the same bits (same summation order). Both layouts, both halves.
  namespace dg = cuda::decode_gemm;
  const bool clusters = GpuInfo().compute_capability >= 90;
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + (tb ? " transpose_b" : ""));
      std::mt19937_64 rng(7);
      HostTensors in = GemmInputs(dt, 16, 2056, 4096, tb, rng);
      AttrMap attrs = {{"transpose_b", tb}, {"alpha", 0.75}};
      const int64_t before = dg::PairClusterLaunchesForTesting();
      OpRun with = RunOnCuda("gemm", in, attrs, "cuda");
      const int64_t launched = dg::PairClusterLaunchesForTesting() - before;
      dg::SetPairClustersForTesting(false);
      OpRun without = RunOnCuda("gemm", in, attrs, "cuda");
      dg::SetPairClustersForTesting(true);
      ASSERT_TRUE(with.status.ok()) << with.status.ToString();
      ASSERT_TRUE(without.status.ok()) << without.status.ToString();
      if (clusters && GpuInfo().sm_count >= 100 && GpuInfo().sm_count <= 160) {
        EXPECT_EQ(launched, 1) << "expected the cluster path on this device";
      }
      EXPECT_EQ(with.outputs["c"].values, without.outputs["c"].values);
      ExpectClose(in, attrs, with, dt, 4096);
    }
  }
}

TEST(GemmGpu, DecodeKernelRefusesLargeM) {
  std::mt19937_64 rng(3);
  HostTensors in = GemmInputs(DType::kFloat16, 33, 64, 64, false, rng);
  OpRun r = RunOnCuda("gemm", in, {}, "cuda");
  EXPECT_EQ(r.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status.message(), "M = 33 > 32 (the decode kernel is for small M)");
}

TEST(GemmGpu, CublasThreadWarmUpCreatesTheHandle) {
  // The daemon's worker threads call the cublas impl's thread_warm_up at
  // start, so the first gemm does not load cuBLASLt and create its handle.
  const OpDef* op = OpRegistry::Global().Find("gemm");
  ASSERT_NE(op, nullptr);
  const ImplDef* cublas = op->FindImpl("cublas");
  ASSERT_NE(cublas, nullptr);
  ASSERT_TRUE(cublas->thread_warm_up);
  if (auto why = cuda::CublasUnavailable(KernelContext{})) GTEST_SKIP() << *why;
  const DeviceInfo dev = GpuInfo(0);
  bool before = true, after = false;
  std::thread t([&] {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    before = cuda::CublasThreadReady(0);
    cublas->thread_warm_up(dev);
    after = cuda::CublasThreadReady(0);
  });
  t.join();
  EXPECT_FALSE(before);
  EXPECT_TRUE(after);
  // A thread that ended passed its handle and workspace on: the next
  // thread starts warm (kerneld/thread_handoff.h), and nothing was destroyed at its exit.
  bool fresh = false;
  std::thread([&] { fresh = cuda::CublasThreadReady(0); }).join();
  EXPECT_TRUE(fresh);
}

// The daemon crashed (SIGSEGV in libcuda under __call_tls_dtors) when a gRPC
// sync thread that had run a cuBLASLt gemm ended: its handle was destroyed
// from a thread-local destructor, after the CUDA runtime's state for that
// thread was gone. Threads that run gemms and end, four at a time, 200 in
// all: every gemm right, and the process still here.
TEST(GemmGpu, ThreadsThatRanCublasEndSafely) {
  if (auto why = cuda::CublasUnavailable(KernelContext{})) GTEST_SKIP() << *why;
  std::mt19937_64 rng(11);
  const HostTensors in = GemmInputs(DType::kBFloat16, 16, 256, 256, false, rng);
  std::atomic<int> failed{0};
  for (int round = 0; round < 50; ++round) {
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&] {
        if (cudaSetDevice(0) != cudaSuccess) return void(failed++);
        const OpRun r = RunOnCuda("gemm", in, {}, "cublas");
        if (!r.status.ok() || !CheckAgainstReference("gemm", in, {}, r.outputs, 2e-2, 2e-2).empty())
          failed++;
      });
    for (auto& t : threads) t.join();
  }
  EXPECT_EQ(failed.load(), 0);
}

TEST(GemmGpu, EmptyInnerDimensionGivesZeros) {
  HostTensors in = {{"a", {DType::kFloat16, {2, 0}, {}}}, {"b", {DType::kFloat16, {0, 3}, {}}}};
  for (const char* backend : {"cuda", "cublas"}) {
    OpRun r = RunOnCuda("gemm", in, {}, backend);
    ASSERT_TRUE(r.status.ok()) << backend << ": " << r.status.ToString();
    EXPECT_EQ(r.outputs["c"].values, std::vector<double>(6, 0.0)) << backend;
  }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
