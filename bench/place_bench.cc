// The scheduler's own cost per request: Scheduler::Place on a validated
// request, as the request runner calls it, with the tuning table on
// (online, a settled bucket) and off. Issue 35 asks for <= 2 us p50 on the
// CPU. Each call is timed alone (steady_clock, ~20 ns of its own); the
// result is the distribution over 200,000 calls.
//
//   place_bench            # prints p50 / p99 per mode
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "config.h"
#include "devices/device_manager.h"
#include "scheduler/scheduler.h"

using namespace kerneld;
using namespace kerneld::server;

namespace {

TensorView View(DType dt, Shape s) {
  TensorView v;
  v.dtype = dt;
  v.shape = std::move(s);
  v.device = Device::Cpu();
  return v;
}

void Measure(const char* label, TuningMode mode, const OpDef& op, const KernelContext& probe,
             const DeviceManager& devices) {
  TuningOptions o;
  o.mode = mode;
  Scheduler s(devices, o);
  constexpr int kCalls = 200000;
  std::vector<int64_t> ns;
  ns.reserve(kCalls);
  for (int i = 0; i < kCalls + 1000; ++i) {
    Placement p;
    const auto t0 = std::chrono::steady_clock::now();
    Status st = s.Place(op, probe, "", "", &p);
    const auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "Place failed: %s\n", st.message().c_str());
      return;
    }
    s.Record(p.ticket, 1000 + 100 * (p.impl == op.impls.data()));  // settle the bucket
    if (i >= 1000)
      ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%-28s %-8s p50 %6.3f us  p99 %6.3f us\n", label, TuningModeName(mode),
              ns[ns.size() / 2] * 1e-3, ns[ns.size() * 99 / 100] * 1e-3);
}

}  // namespace

int main() {
  Config cfg;
  cfg.enable_cuda = false;  // the CPU worker: the same Place on any machine
  DeviceManager devices(cfg);
  // gemm (one CPU impl here) and the two-impl test op, which the table
  // chooses between.
  const OpDef& gemm = *OpRegistry::Global().Find("gemm");
  KernelContext g;
  g.op = &gemm;
  g.inputs = {View(DType::kFloat32, {16, 4096}), View(DType::kFloat32, {4096, 4096})};
  g.outputs = {View(DType::kFloat32, {16, 4096})};
  g.attrs["transpose_b"] = false;
  g.attrs["alpha"] = 1.0;
  const OpDef& two = *OpRegistry::Global().Find("_test_two_speed");
  KernelContext t;
  t.op = &two;
  t.inputs = {View(DType::kFloat32, {4096})};
  t.outputs = {View(DType::kFloat32, {4096})};
  for (TuningMode m : {TuningMode::kOff, TuningMode::kOnline}) {
    Measure("gemm 16x4096x4096", m, gemm, g, devices);
    Measure("_test_two_speed (2 impls)", m, two, t, devices);
  }
  devices.StopAll();
  return 0;
}
