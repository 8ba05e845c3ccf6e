// Scheduler ranking: the highest priority for this request wins among the
// eligible implementations, and ImplDef::priority_for re-ranks per request.
// (An explicit backend is covered through the daemon: service_test.)
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kerneld::server
