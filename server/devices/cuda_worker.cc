#include "devices/cuda_worker.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "devices/pinned_pool.h"
#include "kerneld/call.h"
#include "kerneld/thread_handoff.h"

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
// The states of threads that ended (kerneld/thread_handoff.h): no CUDA
// call from a thread-exit destructor.
ThreadHandoff<ThreadState>& StatePool() {
  static auto* pool = new ThreadHandoff<ThreadState>;
  return *pool;
}
thread_local HandedOffByDevice<ThreadState> t_states(StatePool(), [](const ThreadState& s) {
  return s.stream != nullptr;
});

// This thread's state on `device`: its own, one a thread that ended left,
// or an empty one for EnsureThreadState to make.
ThreadState& StateOf(int device) { return t_states.Get(device); }

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

  // Stage host tensors through one pinned block and one device block per
  // request, at the library's slots (kerneld/call.h, LayOutStaging).
  // Inline storage: nothing allocated on a request's success path.
  KernelContext& ctx = task.call;
  absl::InlinedVector<int64_t, 8> in_off(ctx.inputs.size()), out_off(ctx.outputs.size());
  const StagingLayout staging = LayOutStaging(ctx, 256, std::span(in_off.data(), in_off.size()),
                                              std::span(out_off.data(), out_off.size()));
  const int64_t total = staging.total;

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
      return ResourceExhausted(ctx.op->name + ": cannot allocate " + std::to_string(total) +
                               " bytes on " + info_.device.ToString() + ": " + ErrText(e));
    }
    hbuf = static_cast<char*>(pinned_->Get(static_cast<size_t>(total), &hcap));
    if (hbuf == nullptr) return ResourceExhausted("cannot allocate pinned staging memory");
  }

  // The request's own form runs, with its staged views pointed at their
  // slots in dbuf while it does; the host views come back before the task's
  // completion reads them (the results are copied into them below).
  struct HostView {
    void* data = nullptr;
    int64_t byte_offset = 0;
    Device device;
    void Keep(const TensorView& v) {
      data = v.data, byte_offset = v.byte_offset, device = v.device;
    }
    void Put(TensorView& v) const { v.data = data, v.byte_offset = byte_offset, v.device = device; }
    char* raw() const { return static_cast<char*>(data) + byte_offset; }
  };
  const auto stage = [this](TensorView& v, char* slot) {
    v.data = slot;
    v.byte_offset = 0;
    v.device = info_.device;
  };
  absl::InlinedVector<HostView, 8> host_in(ctx.inputs.size()), host_out(ctx.outputs.size());
  struct Restore {
    KernelContext& ctx;
    const absl::InlinedVector<int64_t, 8>& in_off;
    const absl::InlinedVector<int64_t, 8>& out_off;
    const absl::InlinedVector<HostView, 8>& in;
    const absl::InlinedVector<HostView, 8>& out;
    ~Restore() {
      for (size_t i = 0; i < in_off.size(); ++i)
        if (in_off[i] >= 0) in[i].Put(ctx.inputs[i]);
      for (size_t i = 0; i < out_off.size(); ++i)
        if (out_off[i] >= 0) out[i].Put(ctx.outputs[i]);
    }
  } restore{ctx, in_off, out_off, host_in, host_out};
  ctx.device = info_;
  ctx.stream = s;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (in_off[i] < 0) continue;
    TensorView& v = ctx.inputs[i];
    host_in[i].Keep(v);
    std::memcpy(hbuf + in_off[i], v.raw(), static_cast<size_t>(v.nbytes()));
    stage(v, dbuf + in_off[i]);
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (out_off[i] < 0) continue;
    TensorView& v = ctx.outputs[i];
    host_out[i].Keep(v);
    stage(v, dbuf + out_off[i]);
  }
  // Inputs are contiguous in the pinned block: one H2D copy of the lot.
  if (staging.input_bytes > 0) {
    if (cudaError_t e = cudaMemcpyAsync(dbuf, hbuf, staging.input_bytes, cudaMemcpyHostToDevice, s);
        e != cudaSuccess)
      return Internal("copying inputs to " + info_.device.ToString() + ": " + ErrText(e));
  }
  if (event_timing_) {
    if (cudaError_t e = cudaEventRecord(state.start, s); e != cudaSuccess)
      return Internal("cudaEventRecord: " + ErrText(e));
  }
  const auto launched = std::chrono::steady_clock::now();
  timing->launched_ns = Ns(launched - task.arrival);
  // This worker waits for the stream below: an impl's checks that need
  // the stream done (ctx.deferred) run after that wait, not inside it.
  ctx.defer_checks = true;
  Status st = Call(*task.impl, ctx);  // the library's call path (kerneld/call.h)
  if (event_timing_) {
    if (cudaError_t e = cudaEventRecord(state.stop, s); st.ok() && e != cudaSuccess)
      st = Internal("cudaEventRecord: " + ErrText(e));
  }
  if (!st.ok()) {
    cudaStreamSynchronize(s);
    (void)RunDeferred(&ctx);  // the first failure is the answer
    return st;
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (out_off[i] < 0) continue;
    if (cudaError_t e = cudaMemcpyAsync(hbuf + out_off[i], ctx.outputs[i].raw(),
                                        ctx.outputs[i].nbytes(), cudaMemcpyDeviceToHost, s);
        e != cudaSuccess)
      return Internal("copying outputs from " + info_.device.ToString() + ": " + ErrText(e));
  }
  // Completion by polling an event recorded after the work: the stream's
  // error, if any, comes back from the query as it would from a synchronize.
  cudaError_t e = cudaEventRecord(state.done, s);
  if (e == cudaSuccess) e = WaitFor(state.done);
  if (e != cudaSuccess)
    return Internal(ctx.op->name + " on " + info_.device.ToString() + ": " + ErrText(e));
  KERNELD_RETURN_IF_ERROR(RunDeferred(&ctx));
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
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (out_off[i] < 0) continue;
    std::memcpy(host_out[i].raw(), hbuf + out_off[i], static_cast<size_t>(ctx.outputs[i].nbytes()));
  }
  return Status::Ok();
}

}  // namespace kerneld::server
