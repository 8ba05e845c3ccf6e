#include "scheduler/scheduler.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/container/inlined_vector.h"
#include "kerneld/jit.h"

namespace kerneld::server {

namespace {

// Backend names every server knows, whether or not it can run them here:
// the registry's (OpRegistry::KnownBackends), read once.
const std::set<std::string, std::less<>>& RegistryBackends() {
  static const std::set<std::string, std::less<>> names = [] {
    const auto v = OpRegistry::Global().KnownBackends();
    return std::set<std::string, std::less<>>(v.begin(), v.end());
  }();
  return names;
}

}  // namespace

std::vector<std::string> Scheduler::KnownBackends() const {
  return {RegistryBackends().begin(), RegistryBackends().end()};
}

std::vector<std::string> Scheduler::AvailableBackends() const {
  std::set<std::string> s;
  for (const OpDef* op : OpRegistry::Global().List())
    for (const auto& impl : op->impls)
      for (const auto& w : devices_.workers())
        if (!impl.requires_.RejectDevice(w->Snapshot())) s.insert(impl.backend);
  return {s.begin(), s.end()};
}

std::vector<std::pair<DeviceInfo, std::optional<std::string>>> Scheduler::DeviceEligibility(
    const ImplDef& impl) const {
  std::vector<std::pair<DeviceInfo, std::optional<std::string>>> out;
  for (const auto& w : devices_.workers()) {
    DeviceInfo d = w->Snapshot();
    out.emplace_back(d, impl.requires_.RejectDevice(d));
  }
  return out;
}

Status Scheduler::Place(const OpDef& op, const KernelContext& probe, const std::string& backend,
                        const std::string& device, Placement* out) const {
  const bool any_backend = backend.empty() || backend == "auto";
  if (!any_backend) {
    if (!RegistryBackends().count(backend))
      return InvalidArgument("unknown backend " + Quote(backend) + "; backends are {" + Join(KnownBackends()) +
                             "}, or empty/\"auto\" to let the scheduler choose");
    if (op.FindImpl(backend) == nullptr) {
      std::vector<std::string> has;
      for (const auto& i : op.impls) has.push_back(i.backend);
      std::string why =
          op.name + " has no " + Quote(backend) + " implementation; it has {" + Join(has) + "}";
      if (backend == "cuda" || backend == "cublas" || backend == "nvrtc")
        if (!devices_.cuda().status.empty()) why += " (" + devices_.cuda().status + ")";
      if (backend == "nvrtc")
        if (const JitEngine* e = GetJitEngine())
          if (auto r = e->Unavailable()) why += " (nvrtc: " + *r + ")";
      return FailedPrecondition(why);
    }
  }

  // Inline storage: Place runs on every request, and a host has few devices
  // and an op few implementations.
  absl::InlinedVector<DeviceWorker*, 8> targets;
  if (!device.empty()) {
    Status err;
    DeviceWorker* w = devices_.Find(device, &err);
    if (w == nullptr) return err;
    targets.push_back(w);
  } else {
    // Where the data lives: a tensor already on a GPU pins the request there.
    for (const auto* vs : {&probe.inputs, &probe.outputs})
      for (const auto& v : *vs)
        if (v.device.is_cuda())
          for (const auto& w : devices_.workers())
            if (w->info().device == v.device) targets = {w.get()};
    if (targets.empty())
      for (const auto& w : devices_.workers()) targets.push_back(w.get());
  }

  // Candidates ranked for this request (ImplDef::PriorityFor: an impl may
  // rank higher on the shapes where it was measured faster), each rank
  // computed once.
  absl::InlinedVector<std::pair<int, const ImplDef*>, 4> ranked;
  for (const auto& i : op.impls)
    if (any_backend || i.backend == backend) ranked.emplace_back(i.PriorityFor(probe), &i);
  // A stable insertion sort: an op has a handful of impls, and
  // std::stable_sort allocates a buffer on every call.
  for (size_t i = 1; i < ranked.size(); ++i)
    for (size_t j = i; j > 0 && ranked[j - 1].first < ranked[j].first; --j)
      std::swap(ranked[j - 1], ranked[j]);

  // The first pass only places; reasons are formatted by a second pass, on
  // a refusal. On a GPU host every request's CPU impl is refused by each GPU
  // (and a GPU impl by the CPU): building those messages on the success path
  // cost each request several allocations (docs/performance.md).
  std::vector<std::string> reasons;
  int rejections = 0, unhealthy = 0;
  auto place = [&](bool explain) {
    for (const auto& [rank, impl] : ranked) {
      DeviceWorker* best = nullptr;
      int best_load = 0;
      std::vector<std::string> why_not;
      for (size_t ti = 0; ti < targets.size(); ++ti) {
        DeviceWorker* w = targets[ti];
        // info() is the static description; health changes at run time, so
        // an unhealthy device is described by a snapshot (the requirements
        // read it).
        const bool healthy = w->healthy();
        std::optional<DeviceInfo> snapshot;
        if (!healthy) snapshot = w->Snapshot();
        const DeviceInfo& d = snapshot ? *snapshot : w->info();
        ++rejections;  // undone below when the device takes it
        if (!healthy && d.device.kind == impl->requires_.device_kind) {
          ++unhealthy;
          if (explain)
            why_not.push_back(d.device.ToString() + " is unhealthy after a sticky device error");
          continue;
        }
        if (!impl->requires_.AcceptsDevice(d)) {
          if (explain) why_not.push_back(impl->requires_.RejectDevice(d).value_or("refused"));
          continue;
        }
        // Tensors on one GPU cannot be read from another device.
        bool foreign = false;
        for (const auto* vs : {&probe.inputs, &probe.outputs})
          for (const auto& v : *vs)
            if (v.device.is_cuda() && !(v.device == d.device)) foreign = true;
        if (foreign) {
          if (explain)
            why_not.push_back("its buffers live on another device than " + d.device.ToString());
          continue;
        }
        // The request's own views, judged as staged on d (no copy per
        // device). A refusal here formats its reason even in the first
        // pass; on the success path nothing is formatted.
        if (auto r = impl->requires_.RejectRequest(probe, &d)) {
          if (explain) why_not.push_back(d.device.ToString() + ": " + *r);
          continue;
        }
        --rejections;
        int load = w->queue_depth() + w->inflight();
        if (best == nullptr || load < best_load) {
          best = w;
          best_load = load;
        }
      }
      if (best != nullptr) {
        out->impl = impl;
        out->worker = best;
        return true;
      }
      if (explain) {
        if (why_not.empty()) why_not.push_back("no device");
        reasons.push_back(impl->backend + ": " + Join(why_not, "; "));
      }
    }
    return false;
  };
  if (place(false)) return Status::Ok();
  // Refused: the same pass again, counting and saying why. The devices'
  // health may have changed in between; then the request is placed after all.
  rejections = unhealthy = 0;
  if (place(true)) return Status::Ok();
  if (ranked.empty()) reasons.push_back("no implementation");
  // Every candidate failed only because its device is down: that is the
  // server's state, not the request's fault, and retrying elsewhere helps.
  if (unhealthy > 0 && unhealthy == rejections)
    return Unavailable(op.name + ": " + Join(reasons, "; ") +
                       "; retry on another device or backend");
  std::string msg = op.name + ": no eligible backend";
  if (!device.empty()) msg += " on device " + Quote(device);
  msg += " (" + Join(reasons, "; ") + ")";
  if (!devices_.cuda().status.empty() && !devices_.has_cuda_device())
    msg += "; " + devices_.cuda().status;
  if (backend == "nvrtc")
    if (const JitEngine* e = GetJitEngine())
      if (auto r = e->Unavailable()) msg += "; nvrtc: " + *r;
  return FailedPrecondition(msg);
}

}  // namespace kerneld::server
