#include "devices/cuda_worker.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "devices/pinned_pool.h"
#include "kerneld/call.h"

namespace kerneld::server {

namespace {

// Errors after which the CUDA context is unusable: the device is marked
// unhealthy and its requests fail fast with UNAVAILABLE.
bool IsSticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

std::string ErrText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// Per-thread CUDA state: each thread that runs work for a device (its pool
// threads, and callers that run small requests inline) owns a non-blocking
// stream, a pair of timing events (--gpu_timing=events) and a no-timing
// completion event for it, created on first use. Indexed by device ordinal:
// one caller thread may serve several GPUs. Destroyed with the thread:
// gRPC's sync API ends and starts threads as load changes, and each of
// them that ran a request inline held a stream and three events for good.
struct ThreadState {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr, done = nullptr;
  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  ThreadState(ThreadState&& o) noexcept { *this = std::move(o); }
  ThreadState& operator=(ThreadState&& o) noexcept {
    std::swap(stream, o.stream);
    std::swap(start, o.start);
    std::swap(stop, o.stop);
    std::swap(done, o.done);
    return *this;
  }
  ~ThreadState() {
    // The stream's work is done (every request waits for its own); errors
    // at process exit, with the context gone, are moot.
    if (done) cudaEventDestroy(done);
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Completion is found by polling an event (cudaEventQuery): measured on the
// H100 (bench/completion_bench.cu, scale on 4096 float16 after an idle gap)
// 12.0 us p50 and 21.8 p99, against cudaStreamSynchronize's 11.4 and 51.7.
// A poller holds a core, so at most half the cores poll at once, across
// devices, however many streams (--cuda_streams) or inline runs on gRPC's
// threads wait: the CPU stays with the threads that serve the calls. The
// others sleep in cudaEventSynchronize: the event is made with
// cudaEventBlockingSync. (The 12-28x p99 seen at --cuda_streams=32 was not
// this but gRPC's sync thread churn: daemon.cc, MAX_POLLERS.)
std::atomic<int> g_pollers{0};
const int kMaxPollers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);

// Waits for `done`. cudaSuccess or the stream's error.
cudaError_t WaitFor(cudaEvent_t done) {
  cudaError_t e = cudaEventQuery(done);
  if (e != cudaErrorNotReady) return e;
  if (g_pollers.fetch_add(1, std::memory_order_relaxed) < kMaxPollers) {
    while ((e = cudaEventQuery(done)) == cudaErrorNotReady) {
    }
  } else {
    e = cudaEventSynchronize(done);
  }
  g_pollers.fetch_sub(1, std::memory_order_relaxed);
  return e;
}
thread_local std::vector<ThreadState> t_states;

ThreadState& StateOf(int device) {
  if (t_states.size() <= static_cast<size_t>(device))
    t_states.resize(static_cast<size_t>(device) + 1);
  return t_states[static_cast<size_t>(device)];
}

int64_t Ns(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

CudaWorker::CudaWorker(DeviceInfo info, int streams, int capacity, bool event_timing)
    : DeviceWorker(std::move(info), streams, capacity),
      pinned_(std::make_unique<PinnedPool>(size_t{1} << 30)),
      event_timing_(event_timing) {
  // Staging buffers come from the stream-ordered pool (cudaMallocAsync).
  // By default the pool returns memory to the driver at every sync, which
  // turns each request into a real cudaMalloc; keep up to 4 GiB cached.
  cudaMemPool_t pool;
  if (cudaSetDevice(info_.device.index) == cudaSuccess &&
      cudaDeviceGetDefaultMemPool(&pool, info_.device.index) == cudaSuccess) {
    uint64_t threshold = uint64_t{4} << 30;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  }
  cudaGetLastError();
  Start();
}

CudaWorker::~CudaWorker() { Stop(); }

Status CudaWorker::Execute(Task& task, TaskTiming* timing) {
  if (!healthy_.load()) {
    std::lock_guard<std::mutex> lock(reason_mu_);
    return Unavailable(info_.device.ToString() + " is unhealthy after a sticky CUDA error (" +
                       unhealthy_reason_ + "); retry on another device or backend");
  }
  Status st = Run(task, timing);
  if (!st.ok()) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamQuery(StateOf(info_.device.index).stream);
    if (IsSticky(e)) {
      std::lock_guard<std::mutex> lock(reason_mu_);
      if (healthy_.load()) unhealthy_reason_ = ErrText(e);
      healthy_.store(false);
    }
  }
  return st;
}

Status CudaWorker::EnsureThreadState() {
  const int dev = info_.device.index;
  // The current device is per thread; a caller running inline may have left
  // another one current.
  if (int current = -1; cudaGetDevice(&current) != cudaSuccess || current != dev) {
    if (cudaError_t e = cudaSetDevice(dev); e != cudaSuccess)
      return Internal("cudaSetDevice: " + ErrText(e));
  }
  ThreadState& state = StateOf(dev);
  if (state.stream != nullptr) return Status::Ok();
  // Built whole or not at all: a half-made state would pass the check above
  // (the destructor releases what was made).
  ThreadState made;
  cudaError_t e = cudaStreamCreateWithFlags(&made.stream, cudaStreamNonBlocking);
  const char* what = "cudaStreamCreate";
  if (e == cudaSuccess) e = cudaEventCreate(&made.start), what = "cudaEventCreate";
  if (e == cudaSuccess) e = cudaEventCreate(&made.stop), what = "cudaEventCreate";
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&made.done, cudaEventDisableTiming | cudaEventBlockingSync),
    what = "cudaEventCreate";
  if (e != cudaSuccess) return Internal(std::string(what) + ": " + ErrText(e));
  state = std::move(made);
  // The impls' per-thread warm-up (cuBLASLt's handle: ~0.1 s on the first
  // gemm otherwise), once per thread and device: before the first task on a
  // pool thread, or on the first inline request of a caller thread.
  DeviceWorker::ThreadStart();
  cudaGetLastError();  // a warm-up's failed call must not fail the next request
  cudaSetDevice(dev);  // whatever a warm-up left current
  return Status::Ok();
}

void CudaWorker::ThreadStart() {
  // A failure here is not final: Run tries again and reports it per request.
  if (!EnsureThreadState().ok()) cudaGetLastError();
}

Status CudaWorker::Run(Task& task, TaskTiming* timing) {
  if (Status st = EnsureThreadState(); !st.ok()) return st;
  const ThreadState& state = StateOf(info_.device.index);
  cudaStream_t s = state.stream;

  // Stage host tensors: one pinned block and one device block per request,
  // each tensor at a 256-byte aligned offset.
  auto align = [](int64_t v) { return (v + 255) & ~int64_t{255}; };
  int64_t total = 0;
  // Inline storage: nothing allocated on a request's success path.
  absl::InlinedVector<int64_t, 8> in_off(task.call.inputs.size(), -1),
      out_off(task.call.outputs.size(), -1);
  for (size_t i = 0; i < task.call.inputs.size(); ++i)
    if (task.call.inputs[i].device.is_cpu()) {
      in_off[i] = total;
      total += align(task.call.inputs[i].nbytes());
    }
  for (size_t i = 0; i < task.call.outputs.size(); ++i)
    if (task.call.outputs[i].device.is_cpu()) {
      out_off[i] = total;
      total += align(task.call.outputs[i].nbytes());
    }

  char* dbuf = nullptr;
  char* hbuf = nullptr;
  size_t hcap = 0;
  struct Cleanup {
    cudaStream_t s;
    char** d;
    char** h;
    size_t* hcap;
    PinnedPool* pool;
    ~Cleanup() {
      if (*d) cudaFreeAsync(*d, s);
      if (*h) pool->Put(*h, *hcap);
    }
  } cleanup{s, &dbuf, &hbuf, &hcap, pinned_.get()};
  if (total > 0) {
    if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&dbuf), total, s);
        e != cudaSuccess) {
      cudaGetLastError();
      return ResourceExhausted(task.call.op->name + ": cannot allocate " + std::to_string(total) +
                               " bytes on " + info_.device.ToString() + ": " + ErrText(e));
    }
    hbuf = static_cast<char*>(pinned_->Get(static_cast<size_t>(total), &hcap));
    if (hbuf == nullptr) return ResourceExhausted("cannot allocate pinned staging memory");
  }

  // The request's own form runs in place when everything lives on this
  // device; a request with host tensors runs on a copy whose staged views
  // point into dbuf, and the task's host views receive the results.
  KernelContext staged;
  if (total > 0) {
    staged.op = task.call.op;
    staged.attrs = task.call.attrs;
    staged.inputs = task.call.inputs;
    staged.outputs = task.call.outputs;
  }
  KernelContext& ctx = total > 0 ? staged : task.call;
  ctx.device = info_;
  ctx.stream = s;
  for (size_t i = 0; i < task.call.inputs.size(); ++i) {
    if (in_off[i] < 0) continue;
    const TensorView& h = task.call.inputs[i];
    std::memcpy(hbuf + in_off[i], h.raw(), static_cast<size_t>(h.nbytes()));
    TensorView& d = ctx.inputs[i];
    d.data = dbuf + in_off[i];
    d.byte_offset = 0;
    d.device = info_.device;
  }
  for (size_t i = 0; i < task.call.outputs.size(); ++i) {
    if (out_off[i] < 0) continue;
    TensorView& d = ctx.outputs[i];
    // An in-place output shares its input's staging slot.
    const std::string& ip = task.call.op->outputs[i].in_place_of;
    if (!ip.empty() && in_off[static_cast<size_t>(task.call.op->InputIndex(ip))] >= 0 &&
        task.call.outputs[i].raw() ==
            task.call.inputs[static_cast<size_t>(task.call.op->InputIndex(ip))].raw()) {
      d.data = ctx.inputs[static_cast<size_t>(task.call.op->InputIndex(ip))].data;
      out_off[i] = in_off[static_cast<size_t>(task.call.op->InputIndex(ip))];
    } else {
      d.data = dbuf + out_off[i];
    }
    d.byte_offset = 0;
    d.device = info_.device;
  }
  if (total > 0) {
    // Inputs are contiguous in the pinned block: one H2D copy of the lot.
    int64_t in_bytes = 0;
    for (size_t i = 0; i < task.call.inputs.size(); ++i)
      if (in_off[i] >= 0) in_bytes = in_off[i] + align(task.call.inputs[i].nbytes());
    if (in_bytes > 0) {
      if (cudaError_t e = cudaMemcpyAsync(dbuf, hbuf, in_bytes, cudaMemcpyHostToDevice, s);
          e != cudaSuccess)
        return Internal("copying inputs to " + info_.device.ToString() + ": " + ErrText(e));
    }
  }
  if (event_timing_) {
    if (cudaError_t e = cudaEventRecord(state.start, s); e != cudaSuccess)
      return Internal("cudaEventRecord: " + ErrText(e));
  }
  const auto launched = std::chrono::steady_clock::now();
  timing->launched_ns = Ns(launched - task.arrival);
  Status st = Call(*task.impl, ctx);  // the library's call path (kerneld/call.h)
  if (event_timing_) {
    if (cudaError_t e = cudaEventRecord(state.stop, s); st.ok() && e != cudaSuccess)
      st = Internal("cudaEventRecord: " + ErrText(e));
  }
  if (!st.ok()) {
    cudaStreamSynchronize(s);
    return st;
  }
  for (size_t i = 0; i < task.call.outputs.size(); ++i) {
    if (out_off[i] < 0) continue;
    if (cudaError_t e = cudaMemcpyAsync(hbuf + out_off[i], ctx.outputs[i].raw(),
                                        task.call.outputs[i].nbytes(), cudaMemcpyDeviceToHost, s);
        e != cudaSuccess)
      return Internal("copying outputs from " + info_.device.ToString() + ": " + ErrText(e));
  }
  // Completion by polling an event recorded after the work: the stream's
  // error, if any, comes back from the query as it would from a synchronize.
  cudaError_t e = cudaEventRecord(state.done, s);
  if (e == cudaSuccess) e = WaitFor(state.done);
  if (e != cudaSuccess)
    return Internal(task.call.op->name + " on " + info_.device.ToString() + ": " + ErrText(e));
  const auto done = std::chrono::steady_clock::now();
  timing->kernel_done_ns = Ns(done - task.arrival);
  if (event_timing_) {
    float ms = 0;
    if (e = cudaEventElapsedTime(&ms, state.start, state.stop); e != cudaSuccess)
      return Internal("cudaEventElapsedTime: " + ErrText(e));
    timing->execute_ns = static_cast<int64_t>(ms * 1e6);
  } else {
    // The host's span from the launch call to seeing the work done: the
    // kernel plus launch latency and the staging copies (a few us more than
    // the GPU's own time for a small kernel; the same for a long one).
    timing->execute_ns = Ns(done - launched);
  }
  for (size_t i = 0; i < task.call.outputs.size(); ++i) {
    if (out_off[i] < 0) continue;
    std::memcpy(task.call.outputs[i].raw(), hbuf + out_off[i],
                static_cast<size_t>(task.call.outputs[i].nbytes()));
  }
  return Status::Ok();
}

}  // namespace kerneld::server
