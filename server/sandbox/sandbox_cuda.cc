// The daemon's side of the sandbox on a CUDA build: UserKernelLauncher over
// one Supervisor per GPU. A user kernel's tensors are copied (device to
// device, on the request's stream) into an arena of cudaMalloc memory that
// the worker maps through one IPC handle for that request: the daemon's
// staging comes from a stream-ordered pool, which IPC cannot export, and
// the worker must see nothing but the request's own bytes. Outputs are
// copied back after the worker's reply.
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "kerneld/check.h"
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
  SandboxLauncher(const Config& cfg, std::vector<int> ordinals)
      : timeout_(cfg.user_kernel_timeout_ms) {
    for (int o : ordinals) {
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
    Status st =
        dev.supervisor->Call(Frame::kRun, req.Encode(), std::chrono::milliseconds(timeout_), name);
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

 private:
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
};

}  // namespace

std::unique_ptr<UserKernelLauncher> MakeSandboxLauncher(const Config& cfg,
                                                        const DeviceManager& devices) {
  std::vector<int> ordinals;
  for (const auto& w : devices.workers())
    if (w->info().device.is_cuda()) ordinals.push_back(w->info().device.index);
  if (ordinals.empty()) return nullptr;
  return std::make_unique<SandboxLauncher>(cfg, std::move(ordinals));
}

}  // namespace kerneld::server::sandbox
