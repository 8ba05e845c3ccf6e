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
#include <functional>
#include <string>
#include <vector>

#include "flashinfer/norm.cuh"

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// kernel_bench's clean flush: read 2 x L2 bypassing L1.
__global__ void ReadKernel(const uint4* p, size_t n, unsigned* sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;
}

struct Timer {
  cudaStream_t s;
  void* flush;
  size_t flush_bytes;
  unsigned* sink;
  int sms;
  cudaEvent_t a, b;
  double MedianUs(int reps, const std::function<void()>& f) {
    std::vector<float> t;
    f();
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < reps; ++i) {
      ReadKernel<<<4 * sms, 512, 0, s>>>(static_cast<const uint4*>(flush), flush_bytes / 16, sink);
      CK(cudaEventRecord(a, s));
      f();
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2] * 1000.0;
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
  const double rms = tm.MedianUs(reps, [&] { CK(flashinfer::norm::RMSNorm<T>(x, w, y, rows, h, h, h, 1e-6f, false, tm.s)); });
  const double fused =
      tm.MedianUs(reps, [&] { CK(flashinfer::norm::FusedAddRMSNorm<T>(x, r, w, rows, h, h, h, 1e-6f, false, tm.s)); });
  std::printf("%s{\"op\":\"rmsnorm\",\"dtype\":\"%s\",\"rows\":%d,\"hidden\":%d,\"us\":%.4f}", *first ? "" : ",\n", dt,
              rows, h, rms);
  std::printf(",\n{\"op\":\"fused_add_rmsnorm\",\"dtype\":\"%s\",\"rows\":%d,\"hidden\":%d,\"us\":%.4f}", dt, rows, h,
              fused);
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
  tm.sms = prop.multiProcessorCount;
  tm.flush_bytes = 2 * size_t(prop.l2CacheSize);
  CK(cudaMalloc(&tm.flush, tm.flush_bytes));
  CK(cudaMemset(tm.flush, 1, tm.flush_bytes));
  CK(cudaMalloc(&tm.sink, 4));
  CK(cudaEventCreate(&tm.a));
  CK(cudaEventCreate(&tm.b));
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
