// How a GPU request's launch-to-done span splits, with no server around it
// (kerneld's "launch" + "kernel done" stages once took 34 us for a 3 us
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
// requests), which is what a daemon at one client sees. Three times: on this
// process's own memory alone on the GPU; the same with a second process
// holding a context on the GPU (as a local client does); and on that
// process's memory opened through CUDA IPC (kerneld's registered buffer).
//
//   completion_bench [gap_us=150] [runs=3000]
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

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

// The second process: on "go" it creates its context and a buffer, sends
// the buffer's IPC handle, and holds both until the parent closes the pipe.
[[noreturn]] void Child(int go_fd, int handle_fd) {
  char c;
  if (read(go_fd, &c, 1) != 1) _exit(0);
  void* p = nullptr;
  cudaIpcMemHandle_t h{};
  if (cudaMalloc(&p, 1 << 16) != cudaSuccess || cudaMemset(p, 0, 1 << 16) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess || cudaIpcGetMemHandle(&h, p) != cudaSuccess)
    _exit(1);
  if (write(handle_fd, &h, sizeof h) != static_cast<ssize_t>(sizeof h)) _exit(1);
  while (read(go_fd, &c, 1) > 0) {
  }
  _exit(0);
}

int main(int argc, char** argv) {
  const int gap_us = argc > 1 ? std::atoi(argv[1]) : 150;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3000;
  // Forked before this process touches CUDA: a child of a CUDA process
  // cannot use CUDA.
  int go[2], handle[2];
  if (pipe(go) != 0 || pipe(handle) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    close(handle[0]);
    Child(go[0], handle[1]);
  }
  close(go[0]);
  close(handle[1]);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t start, stop, done;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  const int64_t n = 4096;
  __half* own = nullptr;
  CK(cudaMalloc(&own, n * sizeof(__half)));
  CK(cudaMemset(own, 0, n * sizeof(__half)));
  __half* x = own;
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
  std::printf("%-26s %-12s %8s %8s %9s %9s %9s\n", "memory", "way", "p50", "p99", "gap p50",
              "gap p99", "x plain");
  auto measure = [&](const char* memory) {
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
      std::printf("%-26s %-12s %8.1f %8.1f %9.1f %9.1f %8.2fx\n", memory, w.name, r[0].p50,
                  r[0].p99, r[1].p50, r[1].p99, r[1].p50 / plain_gap);
    }
  };
  measure("own, alone on the GPU");
  // The second process makes its context and buffer.
  cudaIpcMemHandle_t h{};
  if (write(go[1], "g", 1) != 1 ||
      read(handle[0], &h, sizeof h) != static_cast<ssize_t>(sizeof h)) {
    std::fprintf(stderr, "completion_bench: the second process failed\n");
    return 1;
  }
  measure("own, 2nd context present");
  void* opened = nullptr;
  CK(cudaIpcOpenMemHandle(&opened, h, cudaIpcMemLazyEnablePeerAccess));
  x = static_cast<__half*>(opened);
  measure("CUDA IPC, 2nd context");
  CK(cudaIpcCloseMemHandle(opened));
  close(go[1]);
  waitpid(child, nullptr, 0);
  CK(cudaFree(own));
  return 0;
}
