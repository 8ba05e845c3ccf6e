// An op's JIT form (the nvrtc backend, docs/jit.md): how a request maps to
// one kernel of the op's own cuda.cuh, named with its template arguments,
// and to its launch. No CUDA types here: this compiles in every build, so a
// daemon without CUDA still lists the backend (with why it cannot run) and
// can compile for a named architecture (WarmJit).
//
// An op gets its JIT form with one registration beside its cuda.cu:
//
//   // kernels/ops/rmsnorm/jit.cc
//   KERNELD_IMPL(rmsnorm, nvrtc) {
//     RegisterJitImpl(op, "ops/rmsnorm/cuda.cuh", PlanRmsNormJit);
//   }
//
// where the plan is a function of the request (dtype, shape, alignment,
// the device's SM count) that names the kernel and fills its launch; it
// shares its choices with the AOT launcher through a plain plan header
// (common/row_plan.h, ops/<op>/plan.h), so both modes run the same kernel.
// The engine that compiles and launches (server/jit/jit_backend.h) is set by
// the daemon; without one the impl refuses every request, saying so.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kerneld/op.h"

namespace kerneld {

struct JitDim {
  unsigned x = 1, y = 1, z = 1;
};

// Kernel arguments as cuLaunchKernel takes them: each value copied into
// this object, Params() pointing at the copies. The order and the types must
// be the kernel's parameters', exactly (int64_t for int64_t, float for float).
class JitArgs {
 public:
  template <typename T>
  JitArgs& Add(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are trivially copyable");
    static_assert(alignof(T) <= 16);
    const size_t off = (used_ + alignof(T) - 1) / alignof(T) * alignof(T);
    if (off + sizeof(T) > sizeof(buf_)) std::abort();  // a plan's bug: 256 bytes of arguments
    std::memcpy(buf_ + off, &v, sizeof(T));
    used_ = off + sizeof(T);
    offsets_.push_back(off);
    return *this;
  }
  // Pointers into this object: valid while it lives.
  std::vector<void*> Params();
  size_t size() const { return offsets_.size(); }

 private:
  alignas(16) unsigned char buf_[256] = {};
  size_t used_ = 0;
  std::vector<size_t> offsets_;
};

// One launch of one kernel of an op's cuda.cuh.
struct JitLaunch {
  std::string header;  // relative to kernels/: "ops/rmsnorm/cuda.cuh"
  // The kernel and its template arguments, as a C++ name expression:
  // "kerneld::cuda::rmsnorm::RmsNormKernel<__half, 8, 1>". Structure (dtype,
  // vector width, items a thread, block shape) is a template argument;
  // runtime scalars (eps, factor) are in args.
  std::string kernel;
  JitDim grid, block;
  // Thread-block cluster shape (sm_90+): more than one block launches the
  // kernel as clusters of that shape (the split-row plans); grid is in
  // blocks and a multiple of it.
  JitDim cluster;
  unsigned shared_bytes = 0;
  // A persistent kernel: grid.x is capped at the blocks resident on the
  // whole device (occupancy x SMs), as the AOT launcher does.
  bool cap_grid_at_residency = false;
  JitArgs args;
  bool empty = false;  // nothing to do (zero rows): no launch
};

// What a plan may know of the device (a request's, or a warm-up's target).
struct JitTarget {
  int sm_count = 0;
  int compute_capability = 0;
};

// From a validated request to its launch; INVALID_ARGUMENT / UNIMPLEMENTED
// when this form cannot run it (the AOT impl still can).
using JitPlanFn =
    std::function<Status(const KernelContext& ctx, const JitTarget& target, JitLaunch* out)>;

// The daemon's compiler and launcher (server/jit/jit_backend.h).
class JitEngine {
 public:
  virtual ~JitEngine() = default;
  // Why this process cannot run JIT kernels ("libnvrtc not found: ...",
  // "--jit=off"); nullopt when it can.
  virtual std::optional<std::string> Unavailable() const = 0;
  // The impl's rank for a request (ImplDef::priority_for): above the AOT
  // impl once its kernel is loaded (or under --jit=sync), below it while it
  // compiles in the background (which this starts), nullopt to keep the
  // static rank.
  virtual std::optional<int> Rank(const OpDef& op, const KernelContext& probe,
                                  const JitPlanFn& plan) = 0;
  // Plans, compiles when needed (on this thread), and launches on ctx.stream.
  virtual Status Run(KernelContext& ctx, const JitPlanFn& plan) = 0;
};

// The process's engine; nullptr until the daemon sets one.
JitEngine* GetJitEngine();
void SetJitEngine(JitEngine* engine);

// Static ranks of the nvrtc impl (JitEngine::Rank).
inline constexpr int kPriorityJitReady = kPriorityDevice + 5;    // loaded: above the AOT kernel
inline constexpr int kPriorityJitPending = kPriorityDevice - 1;  // compiling: AOT first

// Adds op.Impl("nvrtc", ...) for `plan` (header: the op's cuda.cuh, for the
// docs and ListKernels) and records the plan for FindJitPlan.
void RegisterJitImpl(OpDef& op, const std::string& header, JitPlanFn plan);
// The JIT plan of an op; nullptr when it has no JIT form.
const JitPlanFn* FindJitPlan(std::string_view op);
// Ops with a JIT form, sorted.
std::vector<std::string> JitOps();

// ---- helpers for plans --------------------------------------------------

// NVRTC's spelling of a floating dtype's element type ("__half",
// "__nv_bfloat16", "float"); "" for others.
const char* JitTypeName(DType dt);
// Whether a view's first element will be 16-byte aligned where the kernel
// runs: host views are staged into fresh 256-byte aligned device memory.
bool JitAligned16(const TensorView& v);
// "a, b, c" of template arguments.
std::string JitTemplateArgs(std::initializer_list<std::string> args);

}  // namespace kerneld
