// Scheduler ranking: the highest priority for this request wins among the
// eligible implementations, and ImplDef::priority_for re-ranks per request.
// (An explicit backend is covered through the daemon: service_test.)
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include "common/cpu/small_host.h"
#include "config.h"
#include "devices/device_manager.h"

namespace kerneld::server {
namespace {

Status Noop(KernelContext&) { return Status::Ok(); }

struct Fixture {
  Config cfg;
  std::unique_ptr<DeviceManager> devices;
  std::unique_ptr<Scheduler> scheduler;
  OpDef op{"rank_probe"};
  Fixture() {
    cfg.enable_cuda = false;  // the CPU worker only, on any machine
    devices = std::make_unique<DeviceManager>(cfg);
    scheduler = std::make_unique<Scheduler>(*devices);
    // Two CPU "backends": "fast" ranks first by default; "narrow" ranks
    // first for one-row inputs only.
    op.Input("x", DTypeSet::All());
    op.Impl("fast", Noop, Requirements::Cpu(), 10);
    op.Impl("narrow", Noop, Requirements::Cpu(), 5);
    op.impls.back().priority_for = [](const KernelContext& ctx) -> std::optional<int> {
      if (!ctx.inputs.empty() && ctx.inputs[0].shape.size() == 2 && ctx.inputs[0].shape[0] == 1)
        return 20;
      return std::nullopt;
    };
  }
  std::string PickFor(Shape shape, const std::string& backend = "") {
    KernelContext probe;
    probe.op = &op;
    TensorView x;
    x.dtype = DType::kFloat32;
    x.shape = std::move(shape);
    x.device = Device::Cpu();
    probe.inputs = {x};
    Placement p;
    Status st = scheduler->Place(op, probe, backend, "", &p);
    if (!st.ok()) return "error: " + st.message();
    return p.impl->backend;
  }
};

TEST(Scheduler, PerRequestPriorityReRanks) {
  Fixture f;
  EXPECT_EQ(f.PickFor({4, 8}), "fast");
  EXPECT_EQ(f.PickFor({1, 8}), "narrow");  // priority_for: 20 > 10
  EXPECT_EQ(f.PickFor({1}), "fast");       // predicate does not apply
  EXPECT_EQ(f.op.impls[1].PriorityFor(KernelContext{}), 5);
}

// Place formats its reasons only on a refusal, in a second pass
// (scheduler.cc): that pass must still say why for every implementation,
// and a request some implementation takes gets it with no message.
TEST(Scheduler, ARefusalSaysWhyForEveryImplementation) {
  Fixture f;
  OpDef op{"picky"};
  op.Input("x", DTypeSet::All());
  op.Impl("cuda", Noop, Requirements::Cuda(80), 30);
  op.Impl("cpu", Noop,
          Requirements::Cpu().When("odd lengths only",
                                   [](const KernelContext& ctx) -> std::optional<std::string> {
                                     if (ctx.inputs[0].shape[0] % 2 == 1) return std::nullopt;
                                     return "length " + std::to_string(ctx.inputs[0].shape[0]) +
                                            " is even";
                                   }),
          20);
  auto place = [&](int64_t n, const std::string& backend) {
    KernelContext probe;
    probe.op = &op;
    TensorView x;
    x.dtype = DType::kFloat32;
    x.shape = {n};
    x.device = Device::Cpu();
    probe.inputs = {x};
    Placement p;
    Status st = f.scheduler->Place(op, probe, backend, "", &p);
    return st.ok() ? "placed on " + p.impl->backend : st.message();
  };
  EXPECT_EQ(place(3, ""), "placed on cpu");
  const std::string why = place(4, "");
  EXPECT_NE(why.find("picky: no eligible backend"), std::string::npos) << why;
  EXPECT_NE(why.find("cuda: needs a cuda device; cpu is cpu"), std::string::npos) << why;
  EXPECT_NE(why.find("cpu: cpu: length 4 is even"), std::string::npos) << why;
  const std::string only_gpu = place(3, "cuda");
  EXPECT_NE(only_gpu.find("cuda: needs a cuda device; cpu is cpu"), std::string::npos) << only_gpu;
  EXPECT_EQ(only_gpu.find("length"), std::string::npos) << only_gpu;
}

// The size rule (common/cpu/small_host.h): small host-resident requests of
// linear-time ops rank the CPU above every device implementation; a large
// one, or one with a tensor on a GPU, keeps the static ranking; gemm never
// takes the rule.
TEST(Scheduler, SmallHostRequestsRankCpuFirstForLinearOps) {
  auto probe = [](const OpDef* op, int64_t n, Device where) {
    KernelContext ctx;
    ctx.op = op;
    TensorView v;
    v.dtype = DType::kFloat32;
    v.shape = {n};
    v.device = where;
    ctx.inputs.assign(op->inputs.size(), v);
    ctx.outputs.assign(op->outputs.size(), v);
    return ctx;
  };
  EXPECT_GT(cpu::kSmallHostRank, kPriorityDevice);
  for (const char* name : {"scale", "add", "silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul",
                           "rmsnorm", "fused_add_rmsnorm", "layernorm", "softmax", "rope"}) {
    SCOPED_TRACE(name);
    const OpDef* op = OpRegistry::Global().Find(name);
    ASSERT_NE(op, nullptr);
    const ImplDef* impl = op->FindImpl("cpu");
    ASSERT_NE(impl, nullptr);
    const int64_t views = static_cast<int64_t>(op->inputs.size() + op->outputs.size());
    EXPECT_EQ(impl->PriorityFor(probe(op, 16, Device::Cpu())), cpu::kSmallHostRank);
    EXPECT_EQ(impl->PriorityFor(probe(op, cpu::kSmallHostBytes / 4 / views, Device::Cpu())),
              cpu::kSmallHostRank);
    EXPECT_EQ(impl->PriorityFor(probe(op, cpu::kSmallHostBytes / 4 / views + 1, Device::Cpu())),
              kPriorityFallback);
    EXPECT_EQ(impl->PriorityFor(probe(op, 16, Device::Cuda(0))), kPriorityFallback);
    EXPECT_NE(impl->priority_doc, "");
    for (const ImplDef& other : op->impls) {  // in CUDA builds: the device impls it outranks
      if (&other != impl) {
        EXPECT_LT(other.PriorityFor(probe(op, 16, Device::Cpu())), cpu::kSmallHostRank);
      }
    }
  }
  const OpDef* gemm = OpRegistry::Global().Find("gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_FALSE(gemm->FindImpl("cpu")->priority_for);
}

}  // namespace
}  // namespace kerneld::server
