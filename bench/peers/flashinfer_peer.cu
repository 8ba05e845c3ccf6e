// FlashInfer's norm kernels timed with kernel_bench's method (CUDA events,
// L2 read-flushed between runs, median): the FlashInfer column of
// bench/peers.py. Built by hand against FlashInfer's header-only kernels,
// which bench/fetch_flashinfer takes from its PyPI wheel:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I$(bench/fetch_flashinfer) \
//        bench/peers/flashinfer_peer.cu -o .device/peers/flashinfer_peer
//   flashinfer_peer REPS ROWSxHIDDEN... [topk:ROWSxVOCAB...]   # JSON records on stdout
//
// ROWSxHIDDEN times the norms; topk:ROWSxVOCAB times top_k_mask_logits and
// top_k_renorm_probs (RadixTopK*MultiCTA, which FlashInfer's Python
// functions of those names call) on kernel_bench's inputs for those ops:
// the same hash, logits uniform in [-8, 8), probs in [0.5, 1.5) / VOCAB, a
// k per row of hash % 8192.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "../bench_cuda.cuh"  // CK, FlushedMedianUs
#include "flashinfer/math.cuh"
#include "flashinfer/norm.cuh"
#include "flashinfer/topk.cuh"

namespace kb = kerneld::bench;

// kernel_bench's method: a stream, an L2 read-flush before each run.
struct Timer {
  cudaStream_t s;
  kb::L2Flush flush;
  template <typename F>
  double MedianUs(int reps, F&& f) {
    return kb::FlushedMedianUs(s, reps, flush, std::forward<F>(f));
  }
};

template <typename T>
void Run(Timer& tm, int reps, const char* dt, int rows, int h, bool* first) {
  T *x, *r, *w, *y;
  const size_t n = size_t(rows) * h;
  CK(cudaMalloc(&x, n * sizeof(T)));
  CK(cudaMalloc(&r, n * sizeof(T)));
  CK(cudaMalloc(&y, n * sizeof(T)));
  CK(cudaMalloc(&w, h * sizeof(T)));
  CK(cudaMemset(x, 0x11, n * sizeof(T)));
  CK(cudaMemset(r, 0x12, n * sizeof(T)));
  CK(cudaMemset(w, 0x13, h * sizeof(T)));
  const double rms = tm.MedianUs(
      reps, [&] { CK(flashinfer::norm::RMSNorm<T>(x, w, y, rows, h, h, h, 1e-6f, false, tm.s)); });
  const double fused = tm.MedianUs(reps, [&] {
    CK(flashinfer::norm::FusedAddRMSNorm<T>(x, r, w, rows, h, h, h, 1e-6f, false, tm.s));
  });
  std::printf("%s{\"op\":\"rmsnorm\",\"dtype\":\"%s\",\"rows\":%d,\"hidden\":%d,\"us\":%.4f}",
              *first ? "" : ",\n", dt, rows, h, rms);
  std::printf(
      ",\n{\"op\":\"fused_add_rmsnorm\",\"dtype\":\"%s\",\"rows\":%d,\"hidden\":%d,\"us\":%.4f}",
      dt, rows, h, fused);
  *first = false;
  cudaFree(x), cudaFree(r), cudaFree(y), cudaFree(w);
}

template <typename T>
void RunTopK(Timer& tm, int reps, const char* dt, int rows, int vocab, void* state, bool* first) {
  T *x, *y;
  int32_t* k;
  const size_t n = size_t(rows) * vocab;
  CK(cudaMalloc(&x, n * sizeof(T)));
  CK(cudaMalloc(&y, n * sizeof(T)));
  CK(cudaMalloc(&k, rows * sizeof(int32_t)));
  kb::FillIndex<<<64, 256>>>(k, rows, 2, 8192);
  auto* st = static_cast<flashinfer::sampling::RadixRowState*>(state);
  for (int renorm = 0; renorm < 2; ++renorm) {
    const float lo = renorm ? 0.5f / vocab : -8.0f, hi = renorm ? 1.5f / vocab : 8.0f;
    kb::FillUniform<T><<<1024, 256>>>(x, static_cast<int64_t>(n), 1, lo, hi);
    CK(cudaDeviceSynchronize());
    const double us = tm.MedianUs(reps, [&] {
      if (renorm)
        CK((flashinfer::sampling::RadixTopKRenormProbMultiCTA<T, int32_t>)(x, y, k, rows, 0, vocab,
                                                                           st, tm.s));
      else
        CK((flashinfer::sampling::RadixTopKMaskLogitsMultiCTA<T, int32_t>)(x, y, k, rows, 0, vocab,
                                                                           st, tm.s));
    });
    std::printf("%s{\"op\":\"%s\",\"dtype\":\"%s\",\"rows\":%d,\"hidden\":%d,\"us\":%.4f}",
                *first ? "" : ",\n", renorm ? "top_k_renorm_probs" : "top_k_mask_logits", dt, rows,
                vocab, us);
    *first = false;
  }
  cudaFree(x), cudaFree(y), cudaFree(k);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: flashinfer_peer REPS ROWSxHIDDEN... [topk:ROWSxVOCAB...]\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  Timer tm;
  CK(cudaStreamCreateWithFlags(&tm.s, cudaStreamNonBlocking));
  void* flush = nullptr;
  unsigned* sink = nullptr;
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemset(flush, 1, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  tm.flush = {flush, flush_bytes, prop.multiProcessorCount, sink};
  const int reps = std::atoi(argv[1]);
  // FlashInfer's row states for its multi-block top-k: zeroed once, as its
  // Python functions keep them (each launch leaves them zeroed).
  void* state = nullptr;
  CK(cudaMalloc(&state, 1 << 20));
  CK(cudaMemset(state, 0, 1 << 20));
  bool first = true;
  std::printf("[\n");
  for (int i = 2; i < argc; ++i) {
    int rows = 0, h = 0;
    if (std::sscanf(argv[i], "topk:%dx%d", &rows, &h) == 2) {
      RunTopK<float>(tm, reps, "float32", rows, h, state, &first);
      RunTopK<__half>(tm, reps, "float16", rows, h, state, &first);
      RunTopK<__nv_bfloat16>(tm, reps, "bfloat16", rows, h, state, &first);
      continue;
    }
    if (std::sscanf(argv[i], "%dx%d", &rows, &h) != 2) continue;
    Run<__half>(tm, reps, "float16", rows, h, &first);
    Run<__nv_bfloat16>(tm, reps, "bfloat16", rows, h, &first);
  }
  std::printf("\n]\n");
  return 0;
}
