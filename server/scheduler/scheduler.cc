#include "scheduler/scheduler.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/container/inlined_vector.h"
#include "kerneld/jit.h"
#include "scheduler/placement.h"
#include "scheduler/shape_bucket.h"

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

Scheduler::Scheduler(const DeviceManager& devices, TuningOptions tuning)
    : devices_(devices), tuning_(std::make_unique<TuningTable>(tuning)) {
  for (const auto& w : devices_.workers())
    models_.emplace_back(w.get(), tuning_->ModelId(ModelOf(w->info())));
}

int Scheduler::ModelIdOf(const DeviceWorker* w) const {
  for (const auto& [worker, id] : models_)
    if (worker == w) return id;
  return 0;
}

namespace {

// Whether `w` can run `impl` for this request; formats no reason (the
// explaining pass of Place does).
bool Accepts(const ImplDef& impl, const DeviceWorker& w, const KernelContext& probe) {
  // info() is the static description; health changes at run time, so an
  // unhealthy device is described by a snapshot (the requirements read it).
  const bool healthy = w.healthy();
  std::optional<DeviceInfo> snapshot;
  if (!healthy) {
    if (w.info().device.kind == impl.requires_.device_kind) return false;
    snapshot = w.Snapshot();
  }
  const DeviceInfo& d = snapshot ? *snapshot : w.info();
  if (!impl.requires_.AcceptsDevice(d)) return false;
  // Tensors on one GPU cannot be read from another device.
  for (const auto* vs : {&probe.inputs, &probe.outputs})
    for (const auto& v : *vs)
      if (v.device.is_cuda() && !(v.device == d.device)) return false;
  // The request's own views, judged as staged on d (no copy per device).
  return !impl.requires_.RejectRequest(probe, &d);
}

// An nvrtc impl still compiling ranks kPriorityJitPending (kerneld/jit.h):
// it is not timed against the others until it is loaded.
bool Pending(const ImplDef& impl, int rank) {
  return rank == kPriorityJitPending && impl.backend == "nvrtc";
}

}  // namespace

bool Scheduler::PlaceFast(const OpDef& op, const KernelContext& probe, bool any_backend,
                          const Ranked& ranked, const Targets& targets, Placement* out) const {
  // The host bytes a GPU stages: its transfer time and the memory it takes.
  int64_t host_bytes = 0;
  for (const auto* vs : {&probe.inputs, &probe.outputs})
    for (const auto& v : *vs)
      if (v.device.is_cpu()) host_bytes += v.nbytes();
  const bool tune = any_backend && tuning_->options().mode != TuningMode::kOff;
  const ShapeBucket bucket = BucketOf(op, probe);
  using Cands = absl::InlinedVector<const ImplDef*, 4>;
  struct Option {
    DeviceWorker* worker;
    BucketEntry* entry;
    Cands cands;  // static rank order
    Decision decision;
  };
  for (size_t r = 0; r < ranked.size(); ++r) {
    // The highest-ranked impl some device accepts says which kind of device
    // runs the request; on each such device the table picks among the
    // impls that device accepts.
    const ImplDef* top = ranked[r].second;
    absl::InlinedVector<Option, 8> options;
    for (DeviceWorker* w : targets) {
      if (!Accepts(*top, *w, probe)) continue;
      Option o{w, tuning_->Bucket({&op, bucket, ModelIdOf(w)}), {top}, {}};
      if (tune)
        for (size_t k = r + 1; k < ranked.size(); ++k) {
          const ImplDef* i = ranked[k].second;
          if (i->requires_.device_kind == top->requires_.device_kind &&
              !Pending(*i, ranked[k].first) && Accepts(*i, *w, probe))
            o.cands.push_back(i);
        }
      options.push_back(std::move(o));
    }
    if (options.empty()) continue;
    auto tuned = [&](const Option& o) { return tune && o.cands.size() > 1; };
    int chosen = 0;
    int64_t assumed_ns = 0;
    if (options.size() > 1) {
      absl::InlinedVector<DeviceLoad, 8> loads;
      for (Option& o : options) {
        o.decision =
            tuned(o) ? tuning_->Peek(o.entry, o.cands) : tuning_->Static(o.entry, o.cands[0]);
        const DeviceWorker& w = *o.worker;
        DeviceLoad l;
        l.threads = w.threads();
        l.pending_ns = w.pending_ns();
        l.load = w.queue_depth() + w.inflight();
        l.latency_ns = o.decision.expected_ns;
        if (w.info().device.is_cuda()) {
          l.transfer_ns = host_bytes / kHostToDeviceBytesPerNs;
          l.need_bytes = host_bytes;
          l.free_bytes = w.free_memory();
        }
        loads.push_back(l);
      }
      chosen = ChooseDevice(loads);
      if (chosen < 0) continue;          // no room anywhere: the explaining pass places it
      for (const DeviceLoad& l : loads)  // what an unmeasured device is assumed to take
        if (l.latency_ns > 0) assumed_ns = std::max(assumed_ns, l.latency_ns);
    }
    Option& o = options[static_cast<size_t>(chosen)];
    Decision d;
    if (tuned(o)) {
      d = tuning_->Take(o.entry, o.cands, &out->ticket);
    } else {
      d = tuning_->Static(o.entry, o.cands[0]);
      out->ticket = {o.entry, o.cands[0], false};
    }
    out->impl = o.cands[static_cast<size_t>(d.index)];
    out->worker = o.worker;
    out->estimate_ns = d.expected_ns > 0 ? d.expected_ns : assumed_ns;
    return true;
  }
  return false;
}

std::string Scheduler::ModelOf(const DeviceInfo& d) { return d.name.empty() ? "cpu" : d.name; }

std::vector<std::string> Scheduler::KnownBackends() const {
  return {RegistryBackends().begin(), RegistryBackends().end()};
}

std::vector<std::string> Scheduler::AvailableBackends() const {
  std::set<std::string> s;
  for (const OpDef* op : OpRegistry::Global().List())
    for (const auto& impl : op->impls)
      for (const auto& w : devices_.workers())
        if (impl.backend.rfind('_', 0) != 0 && !impl.requires_.RejectDevice(w->Snapshot()))
          s.insert(impl.backend);  // "_x": a test op's double, not a backend
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
      return InvalidArgument("unknown backend " + Quote(backend) + "; backends are {" +
                             Join(KnownBackends()) +
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

  Targets targets;
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
  Ranked ranked;
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
  if (PlaceFast(op, probe, any_backend, ranked, targets, out)) return Status::Ok();
  // Refused: a pass that counts and says why. The devices' health may have
  // changed in between; then the request is placed after all.
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
