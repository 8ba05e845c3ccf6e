// Question: where does the top-k kernels' time go (top_k_mask_logits,
// top_k_renorm_probs), and which launch plan wins at decode shapes
// (1-64 rows x 32000-128256)? Times kerneld's TopK with the chooser's plan,
// with each forced cluster size of the register plan (0: streaming) and,
// for 16-bit types, the shared-memory plan on 2, 4 and 8 blocks a row of
// 512 or 1024 threads (s<blocks>/<threads>), on kernel_bench's data
// (uniform in [-8, 8), k = hash % 8192) and on logit-like data (normal,
// k = 50), with kernel_bench's method (L2 read-flushed, median), beside a
// copy of the same bytes. With KERNELD_LAB_FLASHINFER defined (FlashInfer's
// include/ on the include path), FlashInfer's RadixTopK*MultiCTA on the
// same inputs, and the kept counts of both compared.
//
//   top_k_lab [REPS]                          one table on stdout
//   top_k_lab REPS DTYPE ROWS VOCAB FORCE [SHARED [flashinfer]]
//                                             one mask run (for a profiler):
//                                             FORCE as g_force_cluster, SHARED
//                                             as g_force_shared; FlashInfer's
//                                             instead with "flashinfer"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_cuda.cuh"
#include "ops/top_k_mask_logits/cuda.cuh"
#ifdef KERNELD_LAB_FLASHINFER
#include "flashinfer/math.cuh"
#include "flashinfer/topk.cuh"
#endif

namespace kb = kerneld::bench;
namespace tk = kerneld::cuda::top_k;

namespace {

__device__ uint32_t LabHash(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9e3779b97f4a7c15ull + seed;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

template <typename T>
__device__ T FromF(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

// normal = 0: uniform [-8, 8); 1: normal(0, 2) logits; 2: softmax-like probs
// (exp of normal, unnormalized: the kernels renormalize).
template <typename T>
__global__ void FillKernel(T* p, int64_t n, int normal, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u1 = (LabHash(i, seed) >> 8) * (1.0f / 16777216.0f) + 1e-7f;
    const float u2 = (LabHash(i, seed + 7) >> 8) * (1.0f / 16777216.0f);
    float v;
    if (normal == 0) {
      v = -8.0f + 16.0f * u2;
    } else {
      const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
      v = normal == 1 ? 2.0f * z : expf(z) * 1e-5f;
    }
    p[i] = FromF<T>(v);
  }
}

__global__ void FillK(int32_t* k, int rows, int fixed) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x)
    k[r] = fixed > 0 ? fixed : static_cast<int32_t>(LabHash(r, 3) % 8192);
}

template <typename T>
__global__ void CountKept(const T* y, int64_t n, bool mask, unsigned long long* out) {
  unsigned long long c = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = static_cast<float>(y[i]);
    c += mask ? (v > -INFINITY) : (v != 0.0f);
  }
  atomicAdd(out, c);
}

__global__ void CopyKernel(const uint4* x, uint4* y, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    y[i] = x[i];
}

template <typename T>
unsigned long long Kept(const T* y, int64_t n, bool mask, unsigned long long* d) {
  CK(cudaMemset(d, 0, 8));
  CountKept<<<264, 512>>>(y, n, mask, d);
  unsigned long long h = 0;
  CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
  return h;
}

template <typename T>
void Run(const char* dt, int rows, int vocab, int data, int fixed_k, int reps, cudaStream_t s,
         const kb::L2Flush& flush, const tk::DeviceCaps& dev, void* fi_state) {
  const int64_t n = int64_t{rows} * vocab;
  T *x, *y;
  int32_t* k;
  unsigned long long* cnt;
  CK(cudaMalloc(&x, n * sizeof(T)));
  CK(cudaMalloc(&y, n * sizeof(T)));
  CK(cudaMalloc(&k, rows * sizeof(int32_t)));
  CK(cudaMalloc(&cnt, 8));
  for (int mode = 0; mode < 2; ++mode) {
    const bool mask = mode == 0;
    FillKernel<T><<<528, 256>>>(x, n, data == 0 ? 0 : (mask ? 1 : 2), 11);
    FillK<<<1, 256>>>(k, rows, fixed_k);
    CK(cudaDeviceSynchronize());
    const double copy = kb::FlushedMedianUs(s, reps, flush, [&] {
      CopyKernel<<<4 * dev.sm_count, 512, 0, s>>>(reinterpret_cast<const uint4*>(x),
                                                  reinterpret_cast<uint4*>(y),
                                                  n * sizeof(T) / 16);
    });
    std::printf("%-6s %-8s %-9s %3d x %6d  copy %7.2f us |", mask ? "mask" : "renorm", dt,
                data == 0 ? "uniform" : "normal", rows, vocab, copy);
    unsigned long long ours_kept = 0;
    double auto_us = 0;
    auto f = [&] {  // kerneld's TopK, on the plan the knobs force
      if (mask)
        CK((tk::TopK<tk::Mode::kMask, T>)(x, y, k, 0, 1, rows, vocab, dev, s));
      else
        CK((tk::TopK<tk::Mode::kRenorm, T>)(x, y, k, 0, 1, rows, vocab, dev, s));
    };
    for (int force = -1; force <= 16; force = force < 1 ? force + 1 : force * 2) {
      tk::g_force_cluster = force;
      const double us = kb::FlushedMedianUs(s, reps, flush, f);
      if (force == -1) {
        auto_us = us;
        const tk::Plan p = tk::ChoosePlan(rows, vocab / (16 / sizeof(T)), 16 / sizeof(T), dev, -1,
                                         tk::kMaxCluster, sizeof(T));
        const int sc = tk::ChooseSharedCluster(rows, vocab, sizeof(T), dev);
        if (sc > 0)  // the shared-memory plan
          std::printf(" auto(s%d/%d) %7.2f (%.2fx copy) |", sc, tk::kSharedThreads, us, copy / us);
        else
          std::printf(" auto(c%d t%d i%d) %7.2f (%.2fx copy) |", p.cluster, p.threads, p.items, us,
                      copy / us);
        ours_kept = Kept(y, n, mask, cnt);
      } else {
        std::printf(" c%d %7.2f", force, us);
      }
    }
    tk::g_force_cluster = -1;
    if constexpr (sizeof(T) == 2) {
      // The shared-memory plan, forced: cluster size x block size.
      for (int sc : {2, 4, 8})
        for (int th : {512, 1024}) {
          tk::g_force_shared = sc;
          tk::g_shared_threads = th;
          const double us = kb::FlushedMedianUs(s, reps, flush, f);
          const unsigned long long kept = Kept(y, n, mask, cnt);
          std::printf(" s%d/%d %7.2f%s", sc, th, us, kept == ours_kept ? "" : " KEPT-MISMATCH");
        }
      tk::g_force_shared = -1;
      tk::g_shared_threads = 0;
    }
#ifdef KERNELD_LAB_FLASHINFER
    auto* st = static_cast<flashinfer::sampling::RadixRowState*>(fi_state);
    auto g = [&] {
      if (mask)
        CK((flashinfer::sampling::RadixTopKMaskLogitsMultiCTA<T, int32_t>)(x, y, k, rows, 0, vocab,
                                                                        st, s));
      else
        CK((flashinfer::sampling::RadixTopKRenormProbMultiCTA<T, int32_t>)(x, y, k, rows, 0, vocab,
                                                                        st, s));
    };
    const double fi = kb::FlushedMedianUs(s, reps, flush, g);
    const unsigned long long fi_kept = Kept(y, n, mask, cnt);
    std::printf(" | flashinfer %7.2f: kerneld %.2fx its speed; kept %llu vs %llu", fi,
                fi / auto_us, ours_kept, fi_kept);
#else
    (void)fi_state;
#endif
    std::printf(" kept %llu\n", ours_kept);
  }
  cudaFree(x), cudaFree(y), cudaFree(k), cudaFree(cnt);
}

template <typename T>
void One(int rows, int vocab, int reps, cudaStream_t s, const tk::DeviceCaps& dev, bool fi,
         void* fi_state) {
  const int64_t n = int64_t{rows} * vocab;
  T *x, *y;
  int32_t* k;
  CK(cudaMalloc(&x, n * sizeof(T)));
  CK(cudaMalloc(&y, n * sizeof(T)));
  CK(cudaMalloc(&k, rows * sizeof(int32_t)));
  FillKernel<T><<<528, 256>>>(x, n, 1, 11);
  FillK<<<1, 256>>>(k, rows, 50);
  for (int i = 0; i < reps; ++i) {
    if (!fi) {
      CK((tk::TopK<tk::Mode::kMask, T>)(x, y, k, 0, 1, rows, vocab, dev, s));
      continue;
    }
#ifdef KERNELD_LAB_FLASHINFER
    CK((flashinfer::sampling::RadixTopKMaskLogitsMultiCTA<
        T, int32_t>)(x, y, k, rows, 0, vocab,
                     static_cast<flashinfer::sampling::RadixRowState*>(fi_state), s));
#else
    (void)fi_state;
#endif
  }
  CK(cudaStreamSynchronize(s));
  cudaFree(x), cudaFree(y), cudaFree(k);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  kb::L2Flush flush;
  void* fbuf;
  unsigned* sink;
  flush.bytes = 2 * size_t(prop.l2CacheSize);
  CK(cudaMalloc(&fbuf, flush.bytes));
  CK(cudaMemset(fbuf, 1, flush.bytes));
  CK(cudaMalloc(&sink, 4));
  flush.buf = fbuf;
  flush.sms = prop.multiProcessorCount;
  flush.sink = sink;
  tk::DeviceCaps dev;
  dev.index = 0;
  dev.compute_capability = prop.major * 10 + prop.minor;
  dev.sm_count = prop.multiProcessorCount;
  void* fi_state = nullptr;
  CK(cudaMalloc(&fi_state, 1 << 20));  // FlashInfer's row states: zeroed once, as its python does
  CK(cudaMemset(fi_state, 0, 1 << 20));
  std::printf("device %s, %d SMs; times in us, median of %d, L2 read-flushed\n", prop.name,
              prop.multiProcessorCount, reps);
  if (argc > 5) {  // one configuration (for a profiler)
    const std::string dt = argv[2];
    const int rows = std::atoi(argv[3]), vocab = std::atoi(argv[4]);
    tk::g_force_cluster = std::atoi(argv[5]);
    if (argc > 6) tk::g_force_shared = std::atoi(argv[6]);
    const bool fi = argc > 7 && std::string(argv[7]) == "flashinfer";
    if (dt == "float32") {
      One<float>(rows, vocab, reps, s, dev, fi, fi_state);
    } else if (dt == "float16") {
      One<__half>(rows, vocab, reps, s, dev, fi, fi_state);
    } else {
      One<__nv_bfloat16>(rows, vocab, reps, s, dev, fi, fi_state);
    }
    return 0;
  }
  for (int data = 0; data < 2; ++data)
    for (int vocab : {32000, 128256})
      for (int rows : {1, 16, 64}) {
        const int fixed_k = data == 0 ? 0 : 50;
        Run<float>("float32", rows, vocab, data, fixed_k, reps, s, flush, dev, fi_state);
        Run<__nv_bfloat16>("bfloat16", rows, vocab, data, fixed_k, reps, s, flush, dev, fi_state);
        Run<__half>("float16", rows, vocab, data, fixed_k, reps, s, flush, dev, fi_state);
      }
  return 0;
}
