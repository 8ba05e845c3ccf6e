// The sandbox worker's CUDA side: its own context on one GPU; per request it
// opens the daemon's IPC handle (the request's tensors and nothing else),
// launches the kernel from the CUBIN (loaded once per worker), synchronizes,
// and closes the handle. EvaluateKernel's timing runs here too (kBench):
// the user's code never runs in the daemon's context. A CUDA error after the launch is sticky to
// this context: the reply is INTERNAL naming it and the worker exits (worker_main).
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <memory>

#include "jit/cuda_driver.h"
#include "kerneld/gpu_timing.h"
#include "sandbox/run_request.h"
#include "sandbox/worker.h"

namespace kerneld::server::sandbox {

namespace {

struct WorkerState {
  int device = -1;
  cudaStream_t stream = nullptr;
  const jit::CudaDriverApi* driver = nullptr;
  std::map<std::string, std::unique_ptr<jit::LoadedModule>> modules;  // by key
};
WorkerState g;

std::string CudaError(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + std::to_string(static_cast<int>(e)) +
         "): " + cudaGetErrorString(e);
}

}  // namespace

Status InitWorkerDevice(int device) {
  if (device < 0) return FailedPrecondition("sandbox worker started without --sandbox_device");
  g.device = device;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return FailedPrecondition("sandbox worker: cudaSetDevice(" + std::to_string(device) +
                              "): " + CudaError(e));
  if (cudaError_t e = cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking); e != cudaSuccess)
    return FailedPrecondition("sandbox worker: cudaStreamCreate: " + CudaError(e));
  std::string why;
  g.driver = jit::LoadCudaDriver(&why);
  if (g.driver == nullptr) return FailedPrecondition("sandbox worker: " + why);
  return Status::Ok();
}

namespace {

// One decoded launch, ready to go: the function, the mapped arena and the
// argument slots (params point into storage).
struct PreparedRun {
  RunRequest req;
  jit::CudaDriverApi::Function fn = nullptr;
  char* base = nullptr;
  std::vector<uint64_t> storage;
  std::vector<void*> params;

  Status Launch() {
    const int r = g.driver->launch_kernel(fn, req.grid[0], req.grid[1], req.grid[2], req.block[0],
                                          req.block[1], req.block[2], req.shared_bytes, g.stream,
                                          params.data(), nullptr);
    if (r != 0) return InvalidArgument("cuLaunchKernel: " + g.driver->ErrorName(r));
    return Status::Ok();
  }
};

Status Prepare(std::string_view payload, PreparedRun* run) {
  RunRequest& req = run->req;
  if (!req.Decode(payload)) return InvalidArgument("sandbox worker: malformed run request");
  auto it = g.modules.find(req.key);
  if (it == g.modules.end()) {
    jit::CompiledModule m;
    m.cubin = req.cubin;
    m.symbols.emplace_back(req.symbol, req.symbol);  // the lowered name itself
    std::unique_ptr<jit::LoadedModule> loaded;
    KERNELD_RETURN_IF_ERROR(jit::LoadedModule::Load(*g.driver, g.device, m, &loaded));
    if (g.modules.size() >= 256) g.modules.clear();  // bounded; reloading is cheap
    it = g.modules.emplace(req.key, std::move(loaded)).first;
  }
  // LoadedModule::Find looks the name expression up in its symbol list:
  // the daemon sends the lowered name, so each module knows it under both.
  std::string why;
  run->fn = it->second->Find(req.symbol, &why);
  if (run->fn == nullptr) {
    g.modules.erase(it);
    return InvalidArgument("sandbox worker: " + why);
  }
  if (!req.ipc_handle.empty()) {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, req.ipc_handle.data(), sizeof h);
    if (cudaError_t e = cudaIpcOpenMemHandle(reinterpret_cast<void**>(&run->base), h,
                                             cudaIpcMemLazyEnablePeerAccess);
        e != cudaSuccess)
      return FailedPrecondition("sandbox worker: cannot map the request's memory: " + CudaError(e));
  }
  // Argument storage: one slot per argument, each 8 bytes and aligned.
  run->storage.assign(req.args.size(), 0);
  run->params.assign(req.args.size(), nullptr);
  for (size_t i = 0; i < req.args.size(); ++i) {
    const RunArg& a = req.args[i];
    void* slot = &run->storage[i];
    switch (a.kind) {
      case RunArg::kPointer: {
        char* p = a.offset <= req.arena_bytes ? run->base + a.offset : nullptr;
        std::memcpy(slot, &p, sizeof p);
        break;
      }
      case RunArg::kInt64:
        std::memcpy(slot, &a.i, sizeof a.i);
        break;
      case RunArg::kFloat:
        std::memcpy(slot, &a.f, sizeof a.f);
        break;
      case RunArg::kBool:
        std::memcpy(slot, &a.b, sizeof a.b);
        break;
    }
    run->params[i] = slot;
  }
  return Status::Ok();
}

// The launch's end: a CUDA error here is sticky (INTERNAL: the worker goes);
// the arena is unmapped otherwise.
Status Finish(PreparedRun& run, Status st) {
  if (cudaError_t e = cudaStreamSynchronize(g.stream); e != cudaSuccess)
    st = Internal("the kernel faulted: " + CudaError(e));  // sticky: the worker goes
  if (run.base != nullptr && st.code() != StatusCode::kInternal) cudaIpcCloseMemHandle(run.base);
  return st;
}

}  // namespace

Status RunInWorker(std::string_view payload) {
  PreparedRun run;
  Status st = Prepare(payload, &run);
  if (!st.ok()) {
    if (run.base != nullptr) cudaIpcCloseMemHandle(run.base);
    return st;
  }
  return Finish(run, run.Launch());
}

Status BenchInWorker(std::string_view payload, double* median_us) {
  int32_t reps = 0;
  if (payload.size() < sizeof reps)
    return InvalidArgument("sandbox worker: malformed bench request");
  std::memcpy(&reps, payload.data(), sizeof reps);
  if (reps < 1 || reps > 10000) return InvalidArgument("sandbox worker: bench reps out of range");
  static L2ReadFlush* flush = nullptr;  // one per worker, kept for its life
  if (flush == nullptr) {
    auto f = std::make_unique<L2ReadFlush>();
    KERNELD_RETURN_IF_ERROR(f->Init());
    flush = f.release();
  }
  PreparedRun run;
  Status st = Prepare(payload.substr(sizeof reps), &run);
  if (!st.ok()) {
    if (run.base != nullptr) cudaIpcCloseMemHandle(run.base);
    return st;
  }
  st = FlushedMedianUs(
      g.stream, reps, *flush, [&] { return run.Launch(); }, median_us);
  // A timed run's CUDA error (FlushedMedianUs says INTERNAL) is the kernel's
  // fault as much as a plain launch's: the context goes either way.
  return Finish(run, st);
}

}  // namespace kerneld::server::sandbox
