// FlashInfer's norm kernels timed with kernel_bench's method (CUDA events,
// L2 read-flushed between runs, median): the FlashInfer column of
// bench/peers.py. Built by hand against FlashInfer's header-only kernels,
// which bench/fetch_flashinfer takes from its PyPI wheel:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I$(bench/fetch_flashinfer) \
//        bench/peers/flashinfer_peer.cu -o .device/peers/flashinfer_peer
//   flashinfer_peer REPS ROWSxHIDDEN...   # JSON records on stdout
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
#include "flashinfer/norm.cuh"

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

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: flashinfer_peer REPS ROWSxHIDDEN...\n");
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
  bool first = true;
  std::printf("[\n");
  for (int i = 2; i < argc; ++i) {
    int rows = 0, h = 0;
    if (std::sscanf(argv[i], "%dx%d", &rows, &h) != 2) continue;
    Run<__half>(tm, reps, "float16", rows, h, &first);
    Run<__nv_bfloat16>(tm, reps, "bfloat16", rows, h, &first);
  }
  std::printf("\n]\n");
  return 0;
}
