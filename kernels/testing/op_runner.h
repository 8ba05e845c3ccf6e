// The test harness: run one op's implementation directly (no server) on
// host tensors through the daemon's own call path (kerneld/call.h):
// prepare, lay out poisoned outputs, call the impl (RunOp). Unit tests run
// it on the CPU (RunOnCpu), gpu tests on a GPU (gpu_util.h, RunOnCuda).
#pragma once

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kerneld/call.h"
#include "kerneld/host_tensor.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"
#include "kerneld/thread_pool.h"

namespace kerneld::testing {

// Host bytes for one tensor, 64-byte aligned, with room for an offset.
struct HostBuffer {
  std::vector<char> storage;
  char* data = nullptr;
  size_t bytes = 0;
  explicit HostBuffer(size_t n, size_t misalign = 0) : storage(n + 128) {
    auto p = reinterpret_cast<uintptr_t>(storage.data());
    data = reinterpret_cast<char*>(((p + 63) & ~uintptr_t{63}) + misalign);
    bytes = n;
  }
};

// Fill pattern for outputs: NaN in float types, so an unwritten element fails
// any comparison.
inline void Poison(char* p, size_t n) { std::memset(p, 0xff, n); }

struct OpRun {
  Status status;
  HostTensors outputs;  // decoded outputs (in-place outputs included)
};

// `misalign` rounded up to the dtype's size: views stay naturally aligned
// (the library's contract, checked by ValidateInputs; the server refuses
// other references) but off every vector width the kernels prefer.
inline size_t NaturalMisalign(size_t misalign, DType dt) {
  const size_t item = ItemSize(dt);
  return (misalign + item - 1) / item * item;
}

// Where RunOp runs an implementation: the memory its tensors live in and
// the context an impl gets (device, stream or thread pool). HostTarget is
// the CPU's; gpu_util.h has CudaTarget, a GPU's.
class RunTarget {
 public:
  virtual ~RunTarget() = default;
  // ctx->device, and its stream or pool.
  virtual void Bind(KernelContext* ctx) = 0;
  // Memory for `bytes` bytes of `dt`: an input's holding `init`, or (init
  // null) an output's, poisoned so an unwritten element fails any check.
  // Freed with the target.
  virtual void* Alloc(size_t bytes, DType dt, const std::string* init) = 0;
  // Waits for the impl's work; its error, if any.
  virtual Status Finish() { return Status::Ok(); }
  // A view's bytes, read back to the host.
  virtual std::string Read(const TensorView& v) = 0;
};

// Host memory, 64-byte aligned and then shifted by `misalign` (rounded up
// to the dtype's size), on the default thread pool.
class HostTarget : public RunTarget {
 public:
  explicit HostTarget(size_t misalign = 0) : misalign_(misalign) {}
  void Bind(KernelContext* ctx) override {
    ctx->device.device = Device::Cpu();
    ctx->pool = &ThreadPool::Default();
  }
  void* Alloc(size_t bytes, DType dt, const std::string* init) override {
    bufs_.push_back(std::make_unique<HostBuffer>(bytes, NaturalMisalign(misalign_, dt)));
    HostBuffer& b = *bufs_.back();
    if (init != nullptr)
      std::memcpy(b.data, init->data(), bytes);
    else
      Poison(b.data, b.bytes);
    return b.data;
  }
  std::string Read(const TensorView& v) override {
    return std::string(static_cast<const char*>(v.raw()), static_cast<size_t>(v.nbytes()));
  }

 private:
  size_t misalign_;
  std::vector<std::unique_ptr<HostBuffer>> bufs_;
};

// The harness, shared by the unit tests, the gpu tests and (its
// PrepareCall) the bench: runs `op` with `backend`'s implementation on
// `inputs` through the library's call path (kerneld/call.h): the inputs
// copied into the target's memory, prepared (attrs, validation, inference),
// outputs laid out poisoned, the impl called, every output read back
// (in-place ones included). When `alias` names an output, it is written
// into its may_alias input's memory.
inline OpRun RunOp(const std::string& op_name, const std::string& backend,
                   const HostTensors& inputs, const AttrMap& attrs, RunTarget& target,
                   const std::string& alias = "") {
  OpRun r;
  const OpDef* op = OpRegistry::Global().Find(op_name);
  if (!op) return {NotFound("no op " + op_name), {}};
  const ImplDef* impl = op->FindImpl(backend);
  if (!impl) return {NotFound(op_name + " has no " + backend + " impl"), {}};
  KernelContext ctx;
  target.Bind(&ctx);
  ctx.inputs.resize(op->inputs.size());
  for (size_t i = 0; i < op->inputs.size(); ++i) {
    auto it = inputs.find(op->inputs[i].name);
    if (it == inputs.end()) continue;
    const std::string bytes = Encode(it->second.dtype, it->second.values);
    TensorView& v = ctx.inputs[i];
    v.data = target.Alloc(bytes.size(), it->second.dtype, &bytes);
    v.device = ctx.device.device;
    v.dtype = it->second.dtype;
    v.shape = it->second.shape;
  }
  r.status = PrepareCall(
      *op, attrs, alias,
      [&](const OutputSpec& spec, int64_t bytes) {
        return target.Alloc(static_cast<size_t>(bytes), spec.dtype, nullptr);
      },
      &ctx);
  if (r.status.ok()) r.status = Call(*impl, ctx);
  if (Status done = target.Finish(); r.status.ok()) r.status = done;
  // A check the impl left for after the target's wait (defer_checks).
  if (Status checked = RunDeferred(&ctx); r.status.ok()) r.status = checked;
  if (!r.status.ok()) return r;
  for (size_t i = 0; i < op->outputs.size(); ++i) {
    const TensorView& v = ctx.outputs[i];
    HostTensor t;
    t.dtype = v.dtype;
    t.shape = v.shape;
    Decode(v.dtype, target.Read(v), &t.values);
    r.outputs[op->outputs[i].name] = std::move(t);
  }
  return r;
}

// RunOp with the "cpu" implementation, in host memory.
inline OpRun RunOnCpu(const std::string& op_name, const HostTensors& inputs, const AttrMap& attrs,
                      const std::string& alias = "", size_t misalign = 0) {
  HostTarget host(misalign);
  return RunOp(op_name, "cpu", inputs, attrs, host, alias);
}

// Asserts every output matches the float64 reference within the dtype's
// tolerance (or the given override). Returns a description of the first
// failure, or "" when all match.
inline std::string CheckAgainstReference(const std::string& op, const HostTensors& inputs,
                                         const AttrMap& attrs, const HostTensors& got,
                                         double rtol_override = -1, double atol_override = -1) {
  HostTensors ref;
  std::string err;
  if (!Reference(op, inputs, attrs, &ref, &err)) return err;
  for (const auto& [name, want] : ref) {
    auto it = got.find(name);
    if (it == got.end()) return "missing output " + name;
    double rtol, atol;
    Tolerance(it->second.dtype, &rtol, &atol);
    if (rtol_override >= 0) rtol = rtol_override;
    if (atol_override >= 0) atol = atol_override;
    auto c = Compare(it->second.values, want.values, rtol, atol);
    if (c.mismatches) {
      auto i = static_cast<size_t>(c.first_bad);
      return name + ": " + std::to_string(c.mismatches) + " of " +
             std::to_string(want.values.size()) + " elements off (first at " + std::to_string(i) +
             ": got " + std::to_string(i < it->second.values.size() ? it->second.values[i] : NAN) +
             ", want " + std::to_string(want.values[i]) + "; max abs err " +
             std::to_string(c.max_abs_err) + ")";
    }
  }
  return "";
}

inline const std::vector<DType>& FloatTypes() {
  static const std::vector<DType> v = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};
  return v;
}

}  // namespace kerneld::testing
