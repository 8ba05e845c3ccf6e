#include "graph/graph_exec.h"

#include <cstring>
#include <new>

#include "graph/graph_device.h"
#include "graph/graph_memory.h"
#include "graph/graph_replay.h"
#include "kerneld/call.h"
#include "kerneld/size.h"

namespace kerneld::server {

namespace {

constexpr int kGraphOpOutputs = 256;

class HostOps final : public GraphDeviceOps {
 public:
  void* Alloc(const KernelContext&, int64_t bytes, Status* error) const override {
    void* p = ::operator new[](static_cast<size_t>(bytes), std::align_val_t{kGraphArenaAlign},
                               std::nothrow);
    if (p == nullptr)
      *error = ResourceExhausted("graph: out of host memory for " + HumanBytes(bytes) +
                                 " of intermediates");
    return p;
  }
  void Free(const KernelContext&, void* p) const override {
    ::operator delete[](p, std::align_val_t{kGraphArenaAlign});
  }
  Status Copy(const KernelContext&, void* dst, const void* src, int64_t bytes) const override {
    if (dst != src && bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
    return Status::Ok();
  }
};

}  // namespace

const GraphDeviceOps& HostGraphOps() {
  static const HostOps ops;
  return ops;
}

const OpDef& GraphOpDef() {
  static const OpDef* op = [] {
    auto* d = new OpDef("graph");
    d->Doc("a request graph (docs/graphs.md)");
    for (int i = 0; i < kGraphOpOutputs; ++i)
      d->outputs.push_back(OutputDef{"out" + std::to_string(i), OutputRule{}, "", "", ""});
    return d;
  }();
  return *op;
}

Status RunGraphSteps(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                     const GraphDeviceOps& ops, const KernelContext& ctx,
                     const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                     char* arena) {
  auto view_of = [&](int id) {
    const GraphValue& v = plan.values[static_cast<size_t>(id)];
    TensorView t;
    t.dtype = v.dtype;
    t.shape = v.shape;
    switch (v.storage.kind) {
      case GraphStorage::Kind::kInput:
      case GraphStorage::Kind::kOutput: {
        const TensorView& s = v.storage.kind == GraphStorage::Kind::kInput
                                  ? inputs[static_cast<size_t>(v.storage.index)]
                                  : outputs[static_cast<size_t>(v.storage.index)];
        t.data = s.data;
        t.byte_offset = s.byte_offset;
        t.device = s.device;
        break;
      }
      case GraphStorage::Kind::kArena:
        t.data = arena + v.storage.offset;
        t.device = ctx.device.device;
        break;
    }
    return t;
  };

  KernelContext k;
  k.device = ctx.device;
  k.stream = ctx.stream;
  k.pool = ctx.pool;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const GraphStepPlan& st = plan.steps[i];
    auto failed = [&](const Status& e) {
      return Status(e.code(), plan.StepLabel(i) + ": " + e.message());
    };
    for (const auto& [from, to] : st.copies) {
      const TensorView src = view_of(from), dst = view_of(to);
      if (Status e = ops.Copy(ctx, const_cast<void*>(dst.raw()), src.raw(), src.nbytes()); !e.ok())
        return failed(e);
    }
    k.op = st.op;
    k.attrs = st.attrs;
    k.inputs.clear();
    for (int id : st.read_from) k.inputs.push_back(view_of(id));
    k.outputs.clear();
    for (int id : st.outputs) k.outputs.push_back(view_of(id));
    // The plan never overlaps what a step reads and writes beyond what its
    // schema allows; checked again here, where the memory is real.
    if (Status e = CheckAliasing(k); !e.ok()) return failed(Internal(e.message()));
    if (Status e = Call(*impls[i], k); !e.ok()) return failed(e);
  }
  return Status::Ok();
}

Status RunGraph(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                KernelContext& ctx) {
  const GraphDeviceOps* ops = ctx.device.device.is_cuda() ? CudaGraphOps() : &HostGraphOps();
  if (ops == nullptr) return Internal("graph: this build has no CUDA support");
  if (impls.size() != plan.steps.size() || ctx.inputs.size() != plan.input_names.size() ||
      ctx.outputs.size() != plan.outputs.size())
    return Internal("graph: the task does not match its plan");
  char* arena = nullptr;
  if (plan.arena_bytes > 0) {
    Status err;
    arena = static_cast<char*>(ops->Alloc(ctx, plan.arena_bytes, &err));
    if (arena == nullptr) return err;
  }
  // Freed however the steps end (on CUDA, ordered after the last launch).
  struct Release {
    const GraphDeviceOps* ops;
    const KernelContext& ctx;
    char* arena;
    ~Release() {
      if (arena != nullptr) ops->Free(ctx, arena);
    }
  } release{ops, ctx, arena};
  return RunGraphSteps(plan, impls, *ops, ctx, ctx.inputs, ctx.outputs, arena);
}

ImplDef MakeGraphImpl(std::shared_ptr<const GraphPlan> plan, std::vector<const ImplDef*> impls,
                      DeviceKind kind, std::string backend, GraphReplayOptions replay) {
  ImplDef impl;
  impl.backend = std::move(backend);
  impl.requires_.device_kind = kind;
  impl.fn = [plan = std::move(plan), impls = std::move(impls),
             replay = std::move(replay)](KernelContext& ctx) {
    if (ctx.device.device.is_cuda() && replay.cache_entries > 0) {
      bool ran = false;
      Status st = RunGraphReplayed(*plan, impls, replay, ctx, &ran);
      if (ran || !st.ok()) return st;
    }
    return RunGraph(*plan, impls, ctx);
  };
  return impl;
}

}  // namespace kerneld::server
