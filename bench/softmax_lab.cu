// Launch-plan sweep for softmax (kernels/ops/softmax/cuda.cuh), on its own:
// no kerneld libraries (its own CMake target; scripts/device_bundle copies
// it to .device/lab). For each decode shape and dtype: the per-row path,
// split rows over clusters of 2..16 blocks of <= 256 or 512 threads, and
// the chooser's plan, each checked (row sums, no NaN) and timed beside a
// device-to-device copy of the same bytes (CUDA events, L2 read-flushed
// before each run, median of --reps). Prints us and x copy.
//
//   softmax_lab [--reps N] [--shapes 16x128256,...]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_cuda.cuh"
#include "ops/softmax/cuda.cuh"

namespace sm = kerneld::cuda::softmax;

namespace {

int g_sms = 1;
unsigned* g_sink = nullptr;
void* g_flush = nullptr;
size_t g_flush_bytes = 0;

template <typename F>
double MedianUs(cudaStream_t s, int reps, F&& f) {
  return kerneld::bench::FlushedMedianUs(s, reps, {g_flush, g_flush_bytes, g_sms, g_sink}, f);
}

__global__ void FillHalf(__half* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __float2half(static_cast<float>((i * 7919) % 1600) / 100.0f - 8.0f);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 4096},   {16, 4096},   {1, 32000},  {16, 32768},
                                                     {64, 50000}, {1, 128256}, {16, 128256}, {64, 128256},
                                                     {256, 128256}, {4096, 4096}};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) {
      shapes.clear();
      std::string l = argv[++i];
      for (size_t p = 0; p < l.size();) {
        long long r = 0, v = 0;
        if (std::sscanf(l.c_str() + p, "%lldx%lld", &r, &v) == 2) shapes.push_back({r, v});
        const size_t c = l.find(',', p);
        p = c == std::string::npos ? l.size() : c + 1;
      }
    } else {
      std::fprintf(stderr, "usage: softmax_lab [--reps N] [--shapes RxV,...]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  sm::DeviceCaps dev{0, prop.major * 10 + prop.minor, prop.multiProcessorCount};
  std::printf("softmax_lab: %s, %d SMs, float16 -> float32, us (x copy)\n", prop.name, g_sms);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  g_flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  CK(cudaMalloc(&g_flush, g_flush_bytes));
  CK(cudaMemset(g_flush, 1, g_flush_bytes));
  CK(cudaMalloc(&g_sink, sizeof(unsigned)));
  int64_t maxn = 0;
  for (auto [r, v] : shapes) maxn = std::max(maxn, r * v);
  __half* x;
  float* y;
  char *ca, *cb;
  CK(cudaMalloc(&x, maxn * 2));
  CK(cudaMalloc(&y, maxn * 4));
  CK(cudaMalloc(&ca, maxn * 3));
  CK(cudaMalloc(&cb, maxn * 3));
  FillHalf<<<1024, 256, 0, s>>>(x, maxn);
  for (auto [rows, vocab] : shapes) {
    const size_t bytes = static_cast<size_t>(rows * vocab) * 6;
    const double copy = MedianUs(s, reps, [&] { CK(cudaMemcpyAsync(cb, ca, bytes / 2, cudaMemcpyDeviceToDevice, s)); });
    const sm::Plan chosen = sm::ChoosePlan(rows, vocab, dev);
    std::printf("%lldx%lld copy %.2f | chosen c%d", static_cast<long long>(rows), static_cast<long long>(vocab), copy,
                chosen.cluster);
    auto run = [&](int cluster, int threads, const char* label) {
      sm::g_force_cluster = cluster;
      sm::g_force_threads = threads;
      CK(cudaMemsetAsync(y, 0xff, rows * vocab * 4, s));
      const int64_t before = sm::g_cluster_launches.load();
      CK((sm::Softmax<__half, float>(x, y, rows, vocab, 1.0f, dev, s)));
      const bool split = sm::g_cluster_launches.load() > before;
      std::vector<float> h(static_cast<size_t>(vocab));
      CK(cudaMemcpy(h.data(), y + (rows - 1) * vocab, vocab * 4, cudaMemcpyDeviceToHost));
      double sum = 0;
      bool nan = false;
      for (float f : h) sum += f, nan |= std::isnan(f);
      const double us = MedianUs(s, reps, [&] { CK((sm::Softmax<__half, float>(x, y, rows, vocab, 1.0f, dev, s))); });
      std::printf(" | %s%s %.2f (%.2f)%s", label, split || cluster <= 0 ? "" : "[row]", us, copy / us,
                  nan || std::fabs(sum - 1) > 1e-3 ? " BAD" : "");
      sm::g_force_cluster = -1;
      sm::g_force_threads = 0;
    };
    run(-1, 0, "chosen");
    run(0, 0, "row");
    for (int c : {2, 4, 8, 16})
      for (int t : {256, 512}) {
        char label[32];
        std::snprintf(label, sizeof label, "c%d/%d", c, t);
        run(c, t, label);
      }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
