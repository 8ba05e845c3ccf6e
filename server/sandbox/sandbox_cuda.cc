// The daemon's side of the sandbox on a CUDA build: UserKernelLauncher over
// one Supervisor per GPU. A user kernel's tensors are copied (device to
// device, on the request's stream) into an arena of cudaMalloc memory that
// the worker maps through one IPC handle for that request: the daemon's
// staging comes from a stream-ordered pool, which IPC cannot export, and
// the worker must see nothing but the request's own bytes. Outputs are
// copied back after the worker's reply. EvaluateKernel runs here too: the
// built-in and a device copy timed in the daemon's context, the user kernel
// timed in the worker (kBench).
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "absl/strings/numbers.h"
#include "kerneld/call.h"
#include "kerneld/check.h"
#include "kerneld/gpu_timing.h"
#include "sandbox/run_request.h"
#include "sandbox/supervisor.h"
#include "sandbox/user_kernel_setup.h"

namespace kerneld::server::sandbox {

namespace {

std::string CudaError(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// One GPU's sandbox: the worker and the arena it maps.
struct DeviceSandbox {
  std::unique_ptr<Supervisor> supervisor;
  std::mutex mu;  // the arena: one request at a time, as the worker runs them
  char* arena = nullptr;
  uint64_t arena_bytes = 0;
  std::string handle;
};

class SandboxLauncher final : public UserKernelLauncher {
 public:
  SandboxLauncher(const Config& cfg, std::vector<DeviceInfo> infos)
      : timeout_(cfg.user_kernel_timeout_ms) {
    for (const DeviceInfo& info : infos) {
      const int o = info.device.index;
      infos_[o] = info;
      auto d = std::make_unique<DeviceSandbox>();
      Supervisor::Options opts;
      opts.device = o;
      d->supervisor = std::make_unique<Supervisor>(opts);
      devices_[o] = std::move(d);
    }
  }
  ~SandboxLauncher() override {
    for (auto& [o, d] : devices_)
      if (d->arena != nullptr) {
        cudaSetDevice(o);
        cudaFree(d->arena);
      }
  }

  Status Launch(const UserKernel& k, KernelContext& ctx) override {
    return Run(k, ctx, 0, nullptr);
  }

  Status Evaluate(const UserKernel& k, const EvaluateProblem& p, EvaluateRun* out) override;

 private:
  // One launch of `k` on ctx's views, through the arena; with bench_reps > 0
  // the worker times it (kBench) and *us gets the median.
  Status Run(const UserKernel& k, KernelContext& ctx, int bench_reps, double* us) {
    const std::string& name = k.spec.name;
    auto dit = devices_.find(ctx.device.device.index);
    if (dit == devices_.end())
      return FailedPrecondition(name + ": no sandbox on " + ctx.device.device.ToString());
    DeviceSandbox& dev = *dit->second;
    const CompiledUserKernel* code = k.ForDevice(ctx.device.compute_capability);
    if (code == nullptr)
      return FailedPrecondition(name + ": not compiled for compute capability " +
                                std::to_string(ctx.device.compute_capability));
    // The instantiation of this call's dtype, and its symbol.
    std::string expr = k.spec.entry_base;
    for (const auto& [dt, e] : EntryInstantiations(k.spec))
      if (dt == DType::kInvalid || dt == ctx.inputs[0].dtype) expr = e;
    RunRequest req;
    req.key = code->key;
    req.cubin = code->module.cubin;
    req.symbol = code->module.Symbol(expr);
    if (req.symbol.empty()) return Internal(name + ": no symbol for " + expr);
    // Shape symbols from the inputs (validated already), then the launch.
    ShapeBindings bind;
    for (size_t i = 0; i < k.spec.inputs.size(); ++i)
      KERNELD_RETURN_IF_ERROR(MatchShape(name, "'" + k.spec.inputs[i].name + "'",
                                         k.spec.inputs[i].shape, ctx.inputs[i].shape, &bind));
    auto lookup = [&](const std::string& s, int64_t* v) {
      if (auto it = bind.symbols.find(s); it != bind.symbols.end()) return *v = it->second, true;
      if (ctx.op->FindAttr(s) != nullptr) return *v = ctx.attr_i(s), true;
      return false;
    };
    LaunchDims dims;
    KERNELD_RETURN_IF_ERROR(k.spec.launch.Eval(lookup, &dims));
    if (dims.empty()) return Status::Ok();
    for (int i = 0; i < 3; ++i) {
      req.grid[i] = static_cast<uint32_t>(dims.grid[i]);
      req.block[i] = static_cast<uint32_t>(dims.block[i]);
    }
    req.shared_bytes = static_cast<uint32_t>(dims.shared_bytes);

    std::lock_guard<std::mutex> lock(dev.mu);
    // The arena: every tensor at a 256-byte aligned offset.
    std::vector<const TensorView*> views;
    for (const auto& v : ctx.inputs) views.push_back(&v);
    for (const auto& v : ctx.outputs) views.push_back(&v);
    std::vector<uint64_t> offsets;
    uint64_t total = 0;
    for (const TensorView* v : views) {
      offsets.push_back(total);
      total += (static_cast<uint64_t>(v->nbytes()) + 255) / 256 * 256;
    }
    KERNELD_RETURN_IF_ERROR(EnsureArena(dev, std::max<uint64_t>(total, 256)));
    auto stream = static_cast<cudaStream_t>(ctx.stream);
    for (size_t i = 0; i < ctx.inputs.size(); ++i)
      if (cudaError_t e = cudaMemcpyAsync(dev.arena + offsets[i], ctx.inputs[i].raw(),
                                          static_cast<size_t>(ctx.inputs[i].nbytes()),
                                          cudaMemcpyDefault, stream);
          e != cudaSuccess)
        return Internal(name + ": copying input to the sandbox: " + CudaError(e));
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
      return Internal(name + ": " + CudaError(e));
    req.ipc_handle = dev.handle;
    req.arena_bytes = dev.arena_bytes;
    for (size_t i = 0; i < views.size(); ++i) req.args.push_back({RunArg::kPointer, offsets[i]});
    for (const auto& s : k.spec.symbols) req.args.push_back({RunArg::kInt64, 0, bind.symbols[s]});
    for (const auto& a : k.spec.attrs) {
      RunArg arg;
      if (a.type == AttrType::kFloat)
        arg = {RunArg::kFloat, 0, 0, static_cast<float>(ctx.attr_f(a.name))};
      if (a.type == AttrType::kInt) arg = {RunArg::kInt64, 0, ctx.attr_i(a.name)};
      if (a.type == AttrType::kBool) arg = {RunArg::kBool, 0, 0, 0, ctx.attr_b(a.name)};
      req.args.push_back(arg);
    }
    Status st;
    if (bench_reps > 0) {
      // Warm-up, flushes and the timed runs: each launch gets the timeout.
      const int32_t reps = bench_reps;
      std::string payload(reinterpret_cast<const char*>(&reps), sizeof reps);
      payload += req.Encode();
      st = dev.supervisor->Call(Frame::kBench, payload,
                                std::chrono::milliseconds(int64_t{timeout_} * (bench_reps + 4)),
                                name);
      if (st.ok() && !absl::SimpleAtod(st.message(), us))
        st = Internal(name + ": the sandbox worker's timing is malformed");
    } else {
      st = dev.supervisor->Call(Frame::kRun, req.Encode(), std::chrono::milliseconds(timeout_),
                                name);
    }
    // The arena is reused by the next request, maybe another principal's:
    // nothing of this one stays in it (after the copies back, in stream order).
    struct Wipe {
      char* p;
      uint64_t n;
      cudaStream_t s;
      ~Wipe() { cudaMemsetAsync(p, 0, n, s); }
    } wipe{dev.arena, total, stream};
    if (!st.ok()) {
      if (st.code() == StatusCode::kInternal || st.code() == StatusCode::kDeadlineExceeded)
        const_cast<UserKernel&>(k).faults.fetch_add(1);
      // The worker's own reply ("the kernel faulted: ...") does not know
      // which kernel it ran; the client and the log must.
      if (st.message().rfind(name + ":", 0) != 0)
        return Status(st.code(), name + ": " + st.message());
      return st;
    }
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      const size_t slot = ctx.inputs.size() + i;
      if (cudaError_t e = cudaMemcpyAsync(ctx.outputs[i].raw(), dev.arena + offsets[slot],
                                          static_cast<size_t>(ctx.outputs[i].nbytes()),
                                          cudaMemcpyDefault, stream);
          e != cudaSuccess)
        return Internal(name + ": copying output from the sandbox: " + CudaError(e));
    }
    return Status::Ok();
  }

  // An arena of at least `bytes`, exported once; grown by replacing it.
  Status EnsureArena(DeviceSandbox& d, uint64_t bytes) {
    if (d.arena_bytes >= bytes) return Status::Ok();
    if (d.arena != nullptr) cudaFree(d.arena);
    d.arena = nullptr;
    d.arena_bytes = 0;
    const uint64_t size = std::max<uint64_t>(bytes, uint64_t{1} << 20);
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&d.arena), size); e != cudaSuccess)
      return ResourceExhausted("user kernel sandbox arena of " + std::to_string(size) +
                               " bytes: " + CudaError(e));
    cudaIpcMemHandle_t h;
    if (cudaError_t e = cudaIpcGetMemHandle(&h, d.arena); e != cudaSuccess)
      return Internal("cudaIpcGetMemHandle of the sandbox arena: " + CudaError(e));
    d.handle.assign(reinterpret_cast<const char*>(&h), sizeof h);
    d.arena_bytes = size;
    return Status::Ok();
  }

  const int timeout_;
  std::map<int, std::unique_ptr<DeviceSandbox>> devices_;
  std::map<int, DeviceInfo> infos_;
};

// Device memory and a stream of the daemon's own for one evaluation, freed
// on every path.
struct EvalScope {
  cudaStream_t stream = nullptr;
  std::vector<void*> allocs;
  ~EvalScope() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (void* p : allocs) cudaFree(p);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  void* Alloc(int64_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))) != cudaSuccess)
      return nullptr;
    allocs.push_back(p);
    return p;
  }
  // ctx's inputs: the problem's values on the device, then its outputs laid
  // out by the op's schema (kerneld/call.h), as kernel_bench's DeviceCall.
  Status Prepare(const OpDef& op, const EvaluateProblem& p, const DeviceInfo& info,
                 KernelContext* ctx) {
    ctx->device = info;
    ctx->stream = stream;
    for (const InputDef& in : op.inputs) {
      const HostTensor& t = p.inputs.at(in.name);
      TensorView v;
      v.device = info.device;
      v.dtype = t.dtype;
      v.shape = t.shape;
      const std::string bytes = Encode(t.dtype, t.values);
      v.data = Alloc(static_cast<int64_t>(bytes.size()));
      if (v.data == nullptr) return ResourceExhausted("EvaluateKernel: device memory for inputs");
      if (cudaError_t e = cudaMemcpy(v.data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
          e != cudaSuccess)
        return Internal("EvaluateKernel: copying inputs: " + CudaError(e));
      ctx->inputs.push_back(v);
    }
    return PrepareCall(
        op, p.attrs, "", [this](const OutputSpec&, int64_t n) { return Alloc(n); }, ctx);
  }
};

// ctx's outputs, read back to the host.
Status ReadOutputs(const KernelContext& ctx, HostTensors* out) {
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const TensorView& v = ctx.outputs[i];
    std::string bytes(static_cast<size_t>(v.nbytes()), '\0');
    if (cudaError_t e = cudaMemcpy(bytes.data(), static_cast<const char*>(v.data) + v.byte_offset,
                                   bytes.size(), cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return Internal("EvaluateKernel: reading outputs: " + CudaError(e));
    HostTensor t{v.dtype, v.shape, {}};
    if (!Decode(v.dtype, bytes, &t.values)) return Internal("EvaluateKernel: output size");
    (*out)[ctx.op->outputs[i].name] = std::move(t);
  }
  return Status::Ok();
}

Status SandboxLauncher::Evaluate(const UserKernel& k, const EvaluateProblem& p, EvaluateRun* out) {
  const int ord = p.device >= 0 ? p.device : (devices_.empty() ? -1 : devices_.begin()->first);
  auto info_it = infos_.find(ord);
  if (info_it == infos_.end())
    return InvalidArgument("EvaluateKernel: no GPU cuda:" + std::to_string(ord) + " here");
  const DeviceInfo& info = info_it->second;
  out->device = info.device.ToString();
  if (cudaError_t e = cudaSetDevice(ord); e != cudaSuccess)
    return Internal("EvaluateKernel: " + CudaError(e));
  EvalScope scope;
  if (cudaError_t e = cudaStreamCreateWithFlags(&scope.stream, cudaStreamNonBlocking);
      e != cudaSuccess)
    return Internal("EvaluateKernel: " + CudaError(e));
  // The built-in's implementation the static ranking picks on this GPU
  // (not nvrtc: its own compile would be timed).
  KernelContext bctx;
  KERNELD_RETURN_IF_ERROR(scope.Prepare(*p.builtin, p, info, &bctx));
  const ImplDef* impl = nullptr;
  for (const ImplDef& i : p.builtin->impls) {
    if (i.requires_.device_kind != DeviceKind::kCuda || i.backend == "nvrtc") continue;
    if (i.requires_.RejectDevice(info) || i.requires_.RejectRequest(bctx)) continue;
    if (impl == nullptr || i.priority > impl->priority) impl = &i;
  }
  if (impl == nullptr)
    return FailedPrecondition("EvaluateKernel: " + p.builtin->name +
                              " has no CUDA implementation for " + out->device +
                              " and these inputs");
  out->builtin_backend = impl->backend;
  // Outputs first, each op on inputs of its own (an in-place op writes them).
  KERNELD_RETURN_IF_ERROR(impl->fn(bctx));
  if (cudaError_t e = cudaStreamSynchronize(scope.stream); e != cudaSuccess)
    return Internal("EvaluateKernel: " + p.builtin->name + ": " + CudaError(e));
  KERNELD_RETURN_IF_ERROR(ReadOutputs(bctx, &out->builtin_outputs));
  KernelContext uctx;
  KERNELD_RETURN_IF_ERROR(scope.Prepare(*p.user, p, info, &uctx));
  KERNELD_RETURN_IF_ERROR(Run(k, uctx, 0, nullptr));
  if (cudaError_t e = cudaStreamSynchronize(scope.stream); e != cudaSuccess)
    return Internal("EvaluateKernel: " + CudaError(e));
  KERNELD_RETURN_IF_ERROR(ReadOutputs(uctx, &out->user_outputs));
  // Timing: kernel_bench's method (kerneld/gpu_timing.h); the user kernel's
  // in the sandbox worker, on the arena the same bytes were copied into.
  L2ReadFlush flush;
  KERNELD_RETURN_IF_ERROR(flush.Init());
  int64_t bytes = 0;
  for (const auto& v : bctx.inputs) bytes += v.nbytes();
  for (const auto& v : bctx.outputs) bytes += v.nbytes();
  void* ca = scope.Alloc(bytes / 2);
  void* cb = scope.Alloc(bytes / 2);
  if (ca == nullptr || cb == nullptr)
    return ResourceExhausted("EvaluateKernel: device memory for the copy");
  KERNELD_RETURN_IF_ERROR(FlushedMedianUs(
      scope.stream, p.iterations, flush,
      [&] {
        cudaError_t e = cudaMemcpyAsync(cb, ca, static_cast<size_t>(bytes / 2),
                                        cudaMemcpyDeviceToDevice, scope.stream);
        return e == cudaSuccess ? Status::Ok() : Internal("copy: " + CudaError(e));
      },
      &out->copy_us));
  KERNELD_RETURN_IF_ERROR(FlushedMedianUs(
      scope.stream, p.iterations, flush, [&] { return impl->fn(bctx); }, &out->builtin_us));
  return Run(k, uctx, p.iterations, &out->user_us);
}

}  // namespace

std::unique_ptr<UserKernelLauncher> MakeSandboxLauncher(const Config& cfg,
                                                        const DeviceManager& devices) {
  std::vector<DeviceInfo> infos;
  for (const auto& w : devices.workers())
    if (w->info().device.is_cuda()) infos.push_back(w->info());
  if (infos.empty()) return nullptr;
  return std::make_unique<SandboxLauncher>(cfg, std::move(infos));
}

}  // namespace kerneld::server::sandbox
