// Variant sweep for the pipelined decode gemm kernel
// (kernels/ops/gemm/gemm_decode_pipe.cuh), on its own: no kerneld libraries,
// so it builds as its own CMake target (gemm_decode_lab, with
// -DKERNELD_LABS=ON; README.md) and runs on the GPU machine next to cuBLAS, a
// device-to-device copy, an empty kernel and a read of b measured in the
// same run.
//
//   gemm_decode_lab [--reps N] [--quick] [--read-flush] [--cluster]
//
// For each layout (b [N, K] "T" and b [K, N]) and dtype: every variant is
// checked against a float64 host reference on random data with a poisoned
// (NaN) output over shapes with tails, then timed (CUDA events, L2 flushed
// before each run by a 2 x L2 memset, or with --read-flush by reading 2 x L2,
// median of --reps) on the decode shapes; --cluster lets two K splits sum
// in a cluster. Prints us, the GB/s of b, the ratio to copy bandwidth and to
// cuBLAS.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_cuda.cuh"
#include "ops/gemm/gemm_decode_pipe.cuh"

namespace dp = kerneld::cuda::decode_pipe;

namespace {

struct Shape {
  int m;
  int64_t n, k;
};

template <typename T>
__global__ void ReduceKernel(const float* partial, T* c, int64_t mn, int splits, float alpha) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < mn;
       i += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < splits; ++k) s += partial[k * mn + i];
    c[i] = dp::detail::RoundTo<T>(alpha * s);
  }
}

int g_sms = 0;
bool g_cluster = false;      // --cluster: splits of K summed across a cluster
float* g_partial = nullptr;  // big enough for every split plan here
constexpr size_t kPartialBytes = size_t{64} << 20;

struct Variant {
  std::string name;
  bool trans_b;
  int split_mult;
  // Launches for (a, b, c, m, n, k); returns the splits used.
  std::function<int(const void*, const void*, void*, int, int64_t, int64_t, cudaStream_t)> run;
};

template <typename T, int MT16, bool kTransB, int TN, int KC, int STAGES>
int LaunchPipe(const void* a, const void* b, void* c, int m, int64_t n, int64_t k, int split_mult,
               cudaStream_t s) {
  auto kernel = dp::DecodePipeKernel<T, MT16, kTransB, TN, KC, STAGES>;
  constexpr int smem = dp::SmemBytes<kTransB, MT16, TN, KC, STAGES>();
  static_assert(smem <= 227 * 1024, "over the sm_90 shared-memory limit");
  static bool prepared = false;
  static int bps = 1;
  if (!prepared) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, dp::kThreads, smem));
    prepared = true;
  }
  const int64_t tiles = (n + TN - 1) / TN;
  const int64_t chunks = (k + KC - 1) / KC;
  // The fewest splits that put a block on 90% of the SMs, times split_mult.
  int64_t splits =
      std::max<int64_t>(1, (static_cast<int64_t>(0.9 * g_sms) + tiles - 1) / tiles) * split_mult;
  splits = std::min(splits, chunks);
  const int cps = static_cast<int>((chunks + splits - 1) / splits);
  splits = (chunks + cps - 1) / cps;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  float* partial = splits > 1 ? g_partial : nullptr;
  if (splits > 1 && static_cast<size_t>(splits) * m * n * 4 > kPartialBytes) {
    std::fprintf(stderr, "partial workspace too small\n");
    std::exit(1);
  }
  const bool cluster = g_cluster && splits == 2;  // as the launcher does
  if (cluster) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(dp::kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = static_cast<unsigned>(splits);
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, kernel, static_cast<const uint16_t*>(a),
                          static_cast<const uint16_t*>(b), static_cast<T*>(c),
                          static_cast<float*>(nullptr), m, n, k, cps, 1.0f, true));
    return static_cast<int>(splits);
  }
  kernel<<<grid, dp::kThreads, smem, s>>>(static_cast<const uint16_t*>(a),
                                          static_cast<const uint16_t*>(b), static_cast<T*>(c),
                                          partial, m, n, k, cps, 1.0f, false);
  CK(cudaGetLastError());
  if (splits > 1) {
    const int64_t mn = int64_t{m} * n;
    ReduceKernel<T>
        <<<static_cast<unsigned>(std::min<int64_t>((mn + 255) / 256, 4 * g_sms)), 256, 0, s>>>(
            partial, static_cast<T*>(c), mn, static_cast<int>(splits), 1.0f);
    CK(cudaGetLastError());
  }
  return static_cast<int>(splits);
}

template <typename T, bool kTransB, int TN, int KC, int STAGES>
Variant MakeVariant(int split_mult) {
  Variant v;
  v.name = "TN" + std::to_string(TN) + "_KC" + std::to_string(KC) + "_S" + std::to_string(STAGES) +
           (split_mult > 1 ? "_x" + std::to_string(split_mult) : "");
  v.trans_b = kTransB;
  v.split_mult = split_mult;
  v.run = [split_mult](const void* a, const void* b, void* c, int m, int64_t n, int64_t k,
                       cudaStream_t s) {
    return m <= 16 ? LaunchPipe<T, 1, kTransB, TN, KC, STAGES>(a, b, c, m, n, k, split_mult, s)
                   : LaunchPipe<T, 2, kTransB, TN, KC, STAGES>(a, b, c, m, n, k, split_mult, s);
  };
  return v;
}

// The launcher's configurations (kernels/cuda/gemm_decode_pipe.cu) first,
// then alternatives measured against them.
template <typename T>
std::vector<Variant> Variants() {
  return {
      MakeVariant<T, true, 32, 256, 4>(1),  MakeVariant<T, true, 64, 256, 3>(1),
      MakeVariant<T, true, 32, 128, 4>(1),  MakeVariant<T, false, 32, 256, 4>(1),
      MakeVariant<T, false, 64, 128, 4>(1), MakeVariant<T, false, 32, 128, 4>(1),
      MakeVariant<T, true, 32, 256, 6>(1),  MakeVariant<T, true, 16, 256, 4>(1),
      MakeVariant<T, true, 32, 256, 4>(2),  MakeVariant<T, false, 32, 256, 6>(1),
      MakeVariant<T, false, 64, 256, 4>(1), MakeVariant<T, false, 128, 128, 3>(1),
      MakeVariant<T, true, 32, 512, 3>(1),  MakeVariant<T, false, 32, 512, 3>(1),
      MakeVariant<T, true, 64, 256, 4>(1),  MakeVariant<T, true, 128, 128, 4>(1),
      MakeVariant<T, false, 64, 256, 3>(1), MakeVariant<T, true, 32, 256, 4>(4),
  };
}

uint16_t ToBits(float v, bool bf16) {
  if (bf16) {
    __nv_bfloat16 h = __float2bfloat16_rn(v);
    uint16_t r;
    std::memcpy(&r, &h, 2);
    return r;
  }
  __half h = __float2half_rn(v);
  uint16_t r;
  std::memcpy(&r, &h, 2);
  return r;
}

float FromBits(uint16_t v, bool bf16) {
  if (bf16) {
    uint32_t u = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half h;
  std::memcpy(static_cast<void*>(&h), &v, 2);
  return __half2float(h);
}

// c = a @ b in float64 on the host, threaded over rows of n.
std::vector<double> Reference(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                              Shape s, bool tb, bool bf16) {
  std::vector<double> af(a.size()), bfv(b.size()), c(static_cast<size_t>(s.m) * s.n);
  for (size_t i = 0; i < a.size(); ++i) af[i] = FromBits(a[i], bf16);
  for (size_t i = 0; i < b.size(); ++i) bfv[i] = FromBits(b[i], bf16);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int th = 0; th < threads; ++th) {
    pool.emplace_back([&, th] {
      for (int64_t n = th; n < s.n; n += threads)
        for (int m = 0; m < s.m; ++m) {
          double sum = 0;
          for (int64_t k = 0; k < s.k; ++k)
            sum += af[m * s.k + k] * (tb ? bfv[n * s.k + k] : bfv[k * s.n + n]);
          c[m * s.n + n] = sum;
        }
    });
  }
  for (auto& t : pool) t.join();
  return c;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

__global__ void EmptyKernel() {}

bool g_read_flush = false;
unsigned* g_sink = nullptr;

template <typename F>
double TimeUs(cudaStream_t s, int reps, void* flush, size_t flush_bytes, F&& f) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (g_read_flush) {
      kerneld::bench::ReadBytes(s, flush, flush_bytes, g_sms, g_sink);
    } else {
      CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, s));
    }
    CK(cudaEventRecord(e0, s));
    f();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.0);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return Median(t);
}

void CublasGemm(cublasHandle_t h, bool bf16, bool tb, const void* a, const void* b, void* c,
                Shape s) {
  // Row-major c = a @ op(b) is column-major c^T = op(b)^T a^T.
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cublasStatus_t st =
      cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(s.n), s.m,
                   static_cast<int>(s.k), &one, b, dt, static_cast<int>(tb ? s.k : s.n), a, dt,
                   static_cast<int>(s.k), &zero, c, dt, static_cast<int>(s.n), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasGemmEx failed: %d\n", static_cast<int>(st));
    std::exit(1);
  }
}

struct Row {
  std::string what;
  double us, gbs, x_copy, x_cublas;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--read-flush")) {
      g_read_flush = true;
    } else if (!std::strcmp(argv[i], "--cluster")) {
      g_cluster = true;
    } else {
      std::fprintf(stderr,
                   "gemm_decode_lab: unknown or incomplete argument '%s' (see the top of "
                   "gemm_decode_lab.cu)\n",
                   argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MiB, reps %d, L2 flushed by %s, split K %s\n", prop.name,
              g_sms, prop.l2CacheSize >> 20, reps,
              g_read_flush ? "reading 2 x L2 (clean)" : "a 2 x L2 memset (dirty)",
              g_cluster ? "summed in a cluster" : "summed by a second kernel");
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(h, s);
  CK(cudaMalloc(&g_partial, kPartialBytes));
  const size_t flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  void* flush = nullptr;
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemset(flush, 1, flush_bytes));
  CK(cudaMalloc(&g_sink, 4));

  const std::vector<Shape> checks = {{16, 4096, 4096}, {1, 136, 264},    {5, 4104, 4104},
                                     {17, 520, 1032},  {32, 4096, 4096}, {1, 8, 8}};
  std::vector<Shape> timed = {{16, 4096, 4096}};
  if (!quick)
    timed.insert(timed.end(),
                 {{1, 4096, 4096}, {32, 4096, 4096}, {16, 14336, 4096}, {16, 4096, 14336}});
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<Row> table;
  int failures = 0;

  for (int dt = 0; dt < 2; ++dt) {
    const bool bf16 = dt == 0;
    const char* dname = bf16 ? "bfloat16" : "float16";
    const std::vector<Variant> variants = bf16 ? Variants<__nv_bfloat16>() : Variants<__half>();
    for (int tbi = 0; tbi < 2; ++tbi) {
      const bool tb = tbi == 0;
      // Correctness: every variant of this layout on every check shape.
      for (const Shape& sh : checks) {
        std::vector<uint16_t> a(static_cast<size_t>(sh.m) * sh.k),
            b(static_cast<size_t>(sh.n) * sh.k);
        for (auto& v : a) v = ToBits(uni(rng), bf16);
        for (auto& v : b) v = ToBits(uni(rng), bf16);
        const std::vector<double> ref = Reference(a, b, sh, tb, bf16);
        void *da, *db, *dc;
        CK(cudaMalloc(&da, a.size() * 2));
        CK(cudaMalloc(&db, b.size() * 2));
        CK(cudaMalloc(&dc, ref.size() * 2));
        CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
        for (const Variant& v : variants) {
          if (v.trans_b != tb) continue;
          CK(cudaMemsetAsync(dc, 0xff, ref.size() * 2, s));  // NaN in both types
          v.run(da, db, dc, sh.m, sh.n, sh.k, s);
          CK(cudaStreamSynchronize(s));
          std::vector<uint16_t> out(ref.size());
          CK(cudaMemcpy(out.data(), dc, out.size() * 2, cudaMemcpyDeviceToHost));
          const double tol = bf16 ? 1e-2 : 1e-3;
          int64_t bad = 0;
          double num = 0, den = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            const double o = FromBits(out[i], bf16);
            if (!(std::fabs(o - ref[i]) <= tol + tol * std::fabs(ref[i]))) ++bad;
            num += (o - ref[i]) * (o - ref[i]);
            den += ref[i] * ref[i];
          }
          if (bad) {
            ++failures;
            std::printf("FAIL %s %s %s %dx%ldx%ld: %ld of %zu out of tolerance, rel err %.2e\n",
                        dname, tb ? "T" : "N", v.name.c_str(), sh.m, static_cast<long>(sh.n),
                        static_cast<long>(sh.k), static_cast<long>(bad), ref.size(),
                        std::sqrt(num / den));
          }
        }
        CK(cudaFree(da));
        CK(cudaFree(db));
        CK(cudaFree(dc));
      }
      std::printf("checked %s %s\n", dname, tb ? "[N, K]" : "[K, N]");
      // Timing.
      for (const Shape& sh : timed) {
        const size_t a_bytes = static_cast<size_t>(sh.m) * sh.k * 2,
                     b_bytes = static_cast<size_t>(sh.n) * sh.k * 2;
        std::vector<uint16_t> a(a_bytes / 2), b(b_bytes / 2);
        for (auto& v : a) v = ToBits(uni(rng), bf16);
        for (auto& v : b) v = ToBits(uni(rng), bf16);
        void *da, *db, *dc, *dcopy;
        CK(cudaMalloc(&da, a_bytes));
        CK(cudaMalloc(&db, b_bytes));
        CK(cudaMalloc(&dc, static_cast<size_t>(sh.m) * sh.n * 2));
        CK(cudaMalloc(&dcopy, b_bytes));
        CK(cudaMemcpy(da, a.data(), a_bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(db, b.data(), b_bytes, cudaMemcpyHostToDevice));
        const double bytes =
            static_cast<double>(a_bytes + b_bytes + static_cast<size_t>(sh.m) * sh.n * 2);
        const double copy_us = TimeUs(s, reps, flush, flush_bytes, [&] {
          CK(cudaMemcpyAsync(dcopy, db, b_bytes, cudaMemcpyDeviceToDevice, s));
        });
        const double copy_gbs = 2.0 * b_bytes / copy_us / 1e3;  // read + write
        const double cublas_us =
            TimeUs(s, reps, flush, flush_bytes, [&] { CublasGemm(h, bf16, tb, da, db, dc, sh); });
        char shape[64];
        std::snprintf(shape, sizeof shape, "%dx%ldx%ld%s", sh.m, static_cast<long>(sh.n),
                      static_cast<long>(sh.k), tb ? "T" : "");
        auto add = [&](const std::string& impl, double us) {
          const double gbs = bytes / us / 1e3;
          table.push_back({std::string(dname) + " " + shape + " " + impl, us, gbs, gbs / copy_gbs,
                           cublas_us / us});
        };
        add("copy(b) " + std::to_string(static_cast<int>(copy_gbs)) + "GB/s", copy_us);
        add("empty kernel", TimeUs(s, reps, flush, flush_bytes, [&] {
              EmptyKernel<<<g_sms, 256, 0, s>>>();
              CK(cudaGetLastError());
            }));
        add("read(b) kernel", TimeUs(s, reps, flush, flush_bytes, [&] {
              kerneld::bench::ReadBytes(s, db, b_bytes, g_sms, g_sink);
            }));
        add("cublas", cublas_us);
        for (const Variant& v : variants) {
          if (v.trans_b != tb) continue;
          int splits = 1;
          const double us = TimeUs(s, reps, flush, flush_bytes,
                                   [&] { splits = v.run(da, db, dc, sh.m, sh.n, sh.k, s); });
          add(v.name + " s" + std::to_string(splits), us);
        }
        CK(cudaFree(da));
        CK(cudaFree(db));
        CK(cudaFree(dc));
        CK(cudaFree(dcopy));
      }
    }
  }
  std::printf("\n%-52s %9s %8s %7s %9s\n", "dtype shape impl", "us", "GB/s", "x copy", "x cublas");
  for (const Row& r : table)
    std::printf("%-52s %9.1f %8.0f %7.2f %9.2f\n", r.what.c_str(), r.us, r.gbs, r.x_copy,
                r.x_cublas);
  std::printf("%s: %d variant/shape checks failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
