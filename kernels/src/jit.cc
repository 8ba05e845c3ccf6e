// The ops' JIT forms (kerneld/jit.h): the nvrtc impl each op registers, the
// plans by op name (for warm-up), and the engine the daemon sets.
#include "kerneld/jit.h"

#include <atomic>
#include <map>
#include <mutex>

namespace kerneld {

namespace {

std::atomic<JitEngine*> g_engine{nullptr};

struct PlanTable {
  std::mutex mu;
  std::map<std::string, JitPlanFn, std::less<>> plans;
};

PlanTable& Plans() {
  static auto* t = new PlanTable();  // never destroyed: read by daemon threads until exit
  return *t;
}

}  // namespace

std::vector<void*> JitArgs::Params() {
  std::vector<void*> out;
  out.reserve(offsets_.size());
  for (size_t off : offsets_) out.push_back(buf_ + off);
  return out;
}

JitEngine* GetJitEngine() { return g_engine.load(std::memory_order_acquire); }
void SetJitEngine(JitEngine* engine) { g_engine.store(engine, std::memory_order_release); }

void RegisterJitImpl(OpDef& op, const std::string& header, JitPlanFn plan) {
  {
    PlanTable& t = Plans();
    std::lock_guard<std::mutex> lock(t.mu);
    t.plans[op.name] = plan;
  }
  Requirements req = Requirements::Cuda(70);
  req.When("libnvrtc loaded and --jit not off; compiles " + header + " for the device's arch",
           [](const KernelContext&) -> std::optional<std::string> {
             JitEngine* e = GetJitEngine();
             if (e == nullptr) return std::string("the JIT is not set up in this process");
             return e->Unavailable();
           });
  const std::string name = op.name;
  op.Impl(
      "nvrtc",
      [plan](KernelContext& ctx) -> Status {
        JitEngine* e = GetJitEngine();
        if (e == nullptr) return FailedPrecondition("nvrtc: the JIT is not set up in this process");
        return e->Run(ctx, plan);
      },
      std::move(req), kPriorityJitPending);
  ImplDef& impl = op.impls.back();
  impl.priority_for = [plan, name](const KernelContext& probe) -> std::optional<int> {
    JitEngine* e = GetJitEngine();
    if (e == nullptr || probe.op == nullptr) return std::nullopt;
    return e->Rank(*probe.op, probe, plan);
  };
  impl.priority_doc =
      "above cuda once the request's specialization is compiled and loaded "
      "(--jit=async compiles it in the background meanwhile; --jit=sync at once)";
}

const JitPlanFn* FindJitPlan(std::string_view op) {
  PlanTable& t = Plans();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.plans.find(op);
  return it == t.plans.end() ? nullptr : &it->second;
}

std::vector<std::string> JitOps() {
  PlanTable& t = Plans();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> out;
  for (const auto& [name, plan] : t.plans) out.push_back(name);
  return out;
}

const char* JitTypeName(DType dt) {
  switch (dt) {
    case DType::kFloat16:
      return "__half";
    case DType::kBFloat16:
      return "__nv_bfloat16";
    case DType::kFloat32:
      return "float";
    default:
      return "";
  }
}

bool JitAligned16(const TensorView& v) {
  if (v.device.is_cpu()) return true;  // staged into fresh device memory
  return v.alignment() >= 16;
}

std::string JitTemplateArgs(std::initializer_list<std::string> args) {
  std::string out;
  for (const auto& a : args) {
    if (!out.empty()) out += ", ";
    out += a;
  }
  return out;
}

}  // namespace kerneld
