// How a GPU request's launch-to-done span splits, with no server around it
// (issue 12: kerneld's "launch" + "kernel done" stages took 34 us for a 3 us
// kernel where a local launch + synchronize takes about 10). One thread, one
// non-blocking stream, `scale` on 4096 float16 in device memory (kerneld's
// own launcher, kernels/ops/scale/cuda.cuh), p50 and p99 of 3000 runs of
// each way of launching and waiting:
//
//   plain       launch, cudaStreamSynchronize            (the floor)
//   events      record, launch, record, synchronize, cudaEventElapsedTime
//               (CudaWorker::Run's sequence)
//   poll        launch, record a no-timing event, spin on cudaEventQuery
//   events+poll record, launch, record, spin on cudaEventQuery, elapsed
//
// each back to back, then again with an idle gap before every run (the
// thread sleeps GAP us, as a server thread does between one client's
// requests), which is what a daemon at one client sees.
//
//   completion_bench [gap_us=150] [runs=3000]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "bench_cuda.cuh"
#include "ops/scale/cuda.cuh"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  double p50, p99;
};

Result Pct(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[v.size() * 99 / 100]};
}

}  // namespace

int main(int argc, char** argv) {
  const int gap_us = argc > 1 ? std::atoi(argv[1]) : 150;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3000;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t start, stop, done;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  const int64_t n = 4096;
  __half* x = nullptr;
  CK(cudaMalloc(&x, n * sizeof(__half)));
  CK(cudaMemset(x, 0, n * sizeof(__half)));
  auto launch = [&] { CK(kerneld::cuda::scale::Scale<__half>(x, x, n, 1.0f, sms, s)); };
  auto spin = [&](cudaEvent_t e) {
    cudaError_t r;
    while ((r = cudaEventQuery(e)) == cudaErrorNotReady) {
    }
    CK(r);
  };
  struct Way {
    const char* name;
    std::function<void()> run;
  };
  float ms = 0;
  const std::vector<Way> ways = {
      {"plain",
       [&] {
         launch();
         CK(cudaStreamSynchronize(s));
       }},
      {"events",
       [&] {
         CK(cudaEventRecord(start, s));
         launch();
         CK(cudaEventRecord(stop, s));
         CK(cudaStreamSynchronize(s));
         CK(cudaEventElapsedTime(&ms, start, stop));
       }},
      {"poll",
       [&] {
         launch();
         CK(cudaEventRecord(done, s));
         spin(done);
       }},
      {"events+poll",
       [&] {
         CK(cudaEventRecord(start, s));
         launch();
         CK(cudaEventRecord(stop, s));
         spin(stop);
         CK(cudaEventElapsedTime(&ms, start, stop));
       }},
  };
  std::printf(
      "scale 4096 float16, one thread, %d runs each, us (gap: sleep %d us before each run)\n", runs,
      gap_us);
  std::printf("%-12s %10s %10s %12s %12s %10s\n", "way", "p50", "p99", "gap p50", "gap p99",
              "x plain");
  double plain_gap = 0;
  for (const Way& w : ways) {
    Result r[2];
    for (int g = 0; g < 2; ++g) {
      for (int i = 0; i < 200; ++i) w.run();
      std::vector<double> t;
      t.reserve(static_cast<size_t>(runs));
      for (int i = 0; i < runs; ++i) {
        if (g == 1) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
        const auto t0 = Clock::now();
        w.run();
        t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
      r[g] = Pct(std::move(t));
    }
    if (plain_gap == 0) plain_gap = r[1].p50;
    std::printf("%-12s %10.1f %10.1f %12.1f %12.1f %9.2fx\n", w.name, r[0].p50, r[0].p99, r[1].p50,
                r[1].p99, r[1].p50 / plain_gap);
  }
  CK(cudaFree(x));
  return 0;
}
