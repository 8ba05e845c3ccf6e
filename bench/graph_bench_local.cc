// The local reference for request graphs (docs/graphs.md, "Measured"): the
// same kernels a kerneld graph runs, launched in one process through the
// library's call path (kerneld/call.h), one by one and replayed as a CUDA
// graph. What a graph call through kerneld is compared with:
//
//   - the Llama-3-8B MLP block at decode, bfloat16, hidden 4096,
//     intermediate 14336, T in {1, 16, 64}: fused_add_rmsnorm -> gemm
//     (gate_up) -> silu_and_mul -> gemm (down);
//   - a chain of 16 scale steps on 4096 float32 elements, replayed from 1
//     and from 8 threads (each its own stream and graph): kernels per second.
//
// Each op runs its first CUDA implementation that takes the device and the
// request (printed); kerneld's scheduler may rank another first.
//
//   graph_bench_local [--iters N] [--seconds S]
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kerneld/call.h"
#include "kerneld/registry.h"

using namespace kerneld;

namespace {

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

DeviceInfo g_dev;
std::mutex g_mu;
std::vector<void*> g_allocs;  // guarded by g_mu (the replaying threads allocate too)

void* Alloc(int64_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))));
  CK(cudaMemset(p, 0x3c, static_cast<size_t>(bytes)));  // small finite values in any float type
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocs.push_back(p);
  return p;
}

TensorView View(DType dt, Shape shape, void* data = nullptr) {
  TensorView v;
  v.dtype = dt;
  v.shape = std::move(shape);
  v.device = g_dev.device;
  v.data = data != nullptr ? data : Alloc(v.nbytes());
  return v;
}

// One step: its context (inputs given, outputs laid out by PrepareCall) and
// the implementation that runs it.
struct Step {
  KernelContext ctx;
  const ImplDef* impl = nullptr;
};

Step MakeStep(const std::string& op_name, std::vector<TensorView> inputs, const AttrMap& attrs,
              cudaStream_t s) {
  const OpDef* op = OpRegistry::Global().Find(op_name);
  if (op == nullptr) std::fprintf(stderr, "no op %s\n", op_name.c_str()), std::exit(1);
  Step st;
  st.ctx.device = g_dev;
  st.ctx.stream = s;
  st.ctx.inputs = std::move(inputs);
  Status ps = PrepareCall(
      *op, attrs, "", [](const OutputSpec&, int64_t n) { return Alloc(n); }, &st.ctx);
  if (!ps.ok())
    std::fprintf(stderr, "%s: %s\n", op_name.c_str(), ps.message().c_str()), std::exit(1);
  for (const ImplDef& impl : op->impls) {
    if (impl.requires_.device_kind != DeviceKind::kCuda) continue;
    if (impl.requires_.RejectDevice(g_dev) || impl.requires_.RejectRequest(st.ctx)) continue;
    if (impl.thread_warm_up) impl.thread_warm_up(g_dev);
    st.impl = &impl;
    break;
  }
  if (st.impl == nullptr) std::fprintf(stderr, "%s: no CUDA impl\n", op_name.c_str()), std::exit(1);
  return st;
}

void Launch(std::vector<Step>& steps) {
  for (Step& st : steps) {
    Status r = Call(*st.impl, st.ctx);
    if (!r.ok())
      std::fprintf(stderr, "%s: %s\n", st.ctx.op->name.c_str(), r.message().c_str()), std::exit(1);
  }
}

cudaGraphExec_t Capture(std::vector<Step>& steps, cudaStream_t s) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  Launch(steps);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, g, 0));
  CK(cudaGraphDestroy(g));
  return exec;
}

template <typename F>
std::pair<double, double> P50P99Us(int iters, F&& f) {
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

struct Timings {
  std::pair<double, double> direct;  // p50, p99 us: the steps launched one by one
  std::pair<double, double> replay;  // the same steps replayed as one CUDA graph
};

// Times `steps` both ways after one warm-up launch, synchronizing the stream
// after each run.
Timings DirectAndReplay(std::vector<Step>& steps, cudaStream_t s, int iters) {
  Timings t;
  Launch(steps);
  CK(cudaStreamSynchronize(s));
  t.direct = P50P99Us(iters, [&] {
    Launch(steps);
    CK(cudaStreamSynchronize(s));
  });
  cudaGraphExec_t exec = Capture(steps, s);
  t.replay = P50P99Us(iters, [&] {
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
  });
  CK(cudaGraphExecDestroy(exec));
  return t;
}

std::vector<Step> Chain16(cudaStream_t s) {
  std::vector<Step> steps;
  TensorView cur = View(DType::kFloat32, {4096});
  for (int i = 0; i < 16; ++i) {
    steps.push_back(MakeStep("scale", {cur}, {{"factor", 1.0 + 0.001 * i}}, s));
    cur = steps.back().ctx.outputs[0];
  }
  return steps;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 2000;
  double seconds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("graph_bench_local: no GPU on this machine; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_dev.device = Device::Cuda(0);
  g_dev.name = prop.name;
  g_dev.compute_capability = prop.major * 10 + prop.minor;
  g_dev.sm_count = prop.multiProcessorCount;
  g_dev.l2_bytes = prop.l2CacheSize;
  g_dev.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  std::printf("device: %s; one host thread launches and waits (cudaStreamSynchronize)\n",
              prop.name);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  const int64_t H = 4096, I = 14336;
  TensorView w_norm = View(DType::kBFloat16, {H});
  TensorView w_gu = View(DType::kBFloat16, {2 * I, H});
  TensorView w_down = View(DType::kBFloat16, {H, I});
  std::printf("\nMLP block, bfloat16 (us; p50 / p99 of launch + wait)\n");
  std::printf("%-4s %-44s %18s %18s\n", "T", "impls", "4 launches", "CUDA graph replay");
  for (int64_t T : {1, 16, 64}) {
    TensorView x = View(DType::kBFloat16, {T, H}), r = View(DType::kBFloat16, {T, H});
    std::vector<Step> steps;
    steps.push_back(MakeStep("fused_add_rmsnorm", {x, r, w_norm}, {{"eps", 1e-5}}, s));
    steps.push_back(MakeStep("gemm", {steps[0].ctx.outputs[0], w_gu}, {{"transpose_b", true}}, s));
    steps.push_back(MakeStep("silu_and_mul", {steps[1].ctx.outputs[0]}, {}, s));
    steps.push_back(
        MakeStep("gemm", {steps[2].ctx.outputs[0], w_down}, {{"transpose_b", true}}, s));
    std::string impls;
    for (const Step& st : steps) impls += (impls.empty() ? "" : ",") + st.impl->backend;
    const auto [direct, replay] = DirectAndReplay(steps, s, iters);
    std::printf("%-4lld %-44s %8.1f / %7.1f %8.1f / %7.1f\n", static_cast<long long>(T),
                impls.c_str(), direct.first, direct.second, replay.first, replay.second);
    // For bench/graph_bench.sh's table.
    std::printf(
        "RESULT local_mlp_direct_p50_us_T%lld %.6g\nRESULT local_mlp_replay_p50_us_T%lld %.6g\n",
        static_cast<long long>(T), direct.first, static_cast<long long>(T), replay.first);
  }

  std::printf("\nchain of 16 scale steps on 4096 float32\n");
  {
    std::vector<Step> steps = Chain16(s);
    const auto [direct, replay] = DirectAndReplay(steps, s, iters);
    std::printf("one thread: 16 launches p50 %.1f us, CUDA graph replay p50 %.1f us\n",
                direct.first, replay.first);
    std::printf("RESULT local_chain_replay_p50_us %.6g\n", replay.first);
  }
  for (int threads : {1, 8}) {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> replays{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        CK(cudaSetDevice(0));
        cudaStream_t ts;
        CK(cudaStreamCreateWithFlags(&ts, cudaStreamNonBlocking));
        std::vector<Step> steps = Chain16(ts);
        cudaGraphExec_t exec = Capture(steps, ts);
        while (!stop.load(std::memory_order_relaxed)) {
          CK(cudaGraphLaunch(exec, ts));
          CK(cudaStreamSynchronize(ts));
          replays.fetch_add(1, std::memory_order_relaxed);
        }
        CK(cudaGraphExecDestroy(exec));
        CK(cudaStreamDestroy(ts));
      });
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop.store(true);
    for (auto& th : pool) th.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%d thread%s replaying: %.0f graphs/s, %.0f kernels/s\n", threads,
                threads == 1 ? "" : "s", static_cast<double>(replays.load()) / secs,
                16.0 * static_cast<double>(replays.load()) / secs);
    std::printf("RESULT local_chain_kernels_per_s_%d %.6g\n", threads,
                16.0 * static_cast<double>(replays.load()) / secs);
  }
  for (void* p : g_allocs) cudaFree(p);
  return 0;
}
