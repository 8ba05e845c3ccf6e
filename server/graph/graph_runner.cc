#include "graph/graph_runner.h"

#include <algorithm>
#include <cstring>

#include "auth/principal_stats.h"
#include "graph/graph_exec.h"
#include "graph/graph_plan.h"
#include "kerneld/check.h"
#include "kerneld/size.h"
#include "service/execution_info.h"
#include "service/request_decode.h"
#include "service/start_status.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

using Clock = std::chrono::steady_clock;
std::atomic<GraphRunner*> g_runner{nullptr};

// Byte range of a view in this process's address space.
struct Range {
  uintptr_t begin = 0, end = 0;
  bool Overlaps(const Range& o) const { return begin < o.end && o.begin < end; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};
Range RangeOf(const TensorView& v) {
  const auto b = reinterpret_cast<uintptr_t>(v.raw());
  return {b, b + static_cast<uintptr_t>(v.nbytes())};
}

}  // namespace

void SetGraphRunner(GraphRunner* runner) { g_runner.store(runner); }
GraphRunner* CurrentGraphRunner() { return g_runner.load(); }

// One graph request's state until its answer.
struct GraphRunner::Call {
  Call(GraphRunner* r, const v1::ExecuteGraphRequest& q, v1::ExecuteGraphResponse* p,
       std::function<void(const Status&)>&& d, Clock::time_point t)
      : runner(r), req(q), resp(p), user_done(std::move(d)), arrival(t) {}

  void Done(const Status& st) {
    if (finished.exchange(true)) return;
    if (!st.ok()) resp->clear_outputs();
    resp->mutable_status()->set_code(static_cast<int>(st.code()));
    if (!st.ok()) resp->mutable_status()->set_message(st.message());
    const int64_t now = NsSince(arrival);
    resp->mutable_info()->set_total_ns(now);
    resp->mutable_info()->set_completed_ns(now);
    memory.Reset();
    pins.clear();
    if (principal_inflight) principal_inflight->fetch_sub(1);
    user_done(st);
    runner->inflight_.fetch_sub(1);
  }

  GraphRunner* runner;
  const v1::ExecuteGraphRequest& req;
  v1::ExecuteGraphResponse* resp;
  std::function<void(const Status&)> user_done;
  Clock::time_point arrival;
  std::atomic<bool> finished{false};
  std::shared_ptr<GraphPlan> plan;
  ImplDef impl;
  Scratch scratch;
  std::vector<RegionPin> pins;
  MemoryBudget::Lease memory;
  std::shared_ptr<std::atomic<int64_t>> principal_inflight;
  Metrics::Series* series = nullptr;
  std::string device_id;
};

GraphRunner::GraphRunner(const Config& cfg, const DeviceManager& devices,
                         const Scheduler& scheduler, Metrics& metrics, BufferRegistry* buffers,
                         MemoryBudget* budget)
    : cfg_(cfg),
      devices_(devices),
      scheduler_(scheduler),
      metrics_(metrics),
      buffers_(buffers),
      own_budget_(budget ? nullptr
                         : std::make_unique<MemoryBudget>(int64_t{cfg.max_inflight_mb} << 20)),
      budget_(budget ? budget : own_budget_.get()) {}

void GraphRunner::Start(const v1::ExecuteGraphRequest& req, v1::ExecuteGraphResponse* resp,
                        CallControl ctl, std::function<void(const Status&)> done) {
  const auto arrival = Clock::now();
  inflight_.fetch_add(1);
  std::shared_ptr<Call> call;
  const Status thrown = StartStatus("graph", [&] {
    call = std::make_shared<Call>(this, req, resp, std::move(done), arrival);
    StartImpl(call, std::move(ctl));
  });
  if (thrown.ok()) return;
  if (call != nullptr) {
    call->Done(thrown);
  } else {
    resp->mutable_status()->set_code(static_cast<int>(thrown.code()));
    resp->mutable_status()->set_message(thrown.message());
    done(thrown);
    inflight_.fetch_sub(1);
  }
}

void GraphRunner::StartImpl(const std::shared_ptr<Call>& call, CallControl ctl) {
  Call& c = *call;
  const v1::ExecuteGraphRequest& req = c.req;
  v1::ExecuteGraphResponse* resp = c.resp;
  resp->set_request_id(req.request_id());
  auto fail = [&](const Status& st, const std::string& backend = "none",
                  const std::string& device = "none") {
    metrics_.ObserveRequest(metrics_.For("graph", backend, device), st.code(),
                            static_cast<double>(NsSince(c.arrival)) * 1e-9);
    c.Done(st);
  };

  if (draining_.load())
    return fail(Unavailable(
        "kerneld is shutting down and accepts no new requests; retry on another replica"));
  if (!ctl.refused.ok()) return fail(ctl.refused);
  if (ctl.principal_inflight) {  // --quota_inflight / max_inflight=: a graph is one request
    const int64_t now = ctl.principal_inflight->fetch_add(1) + 1;
    c.principal_inflight = std::move(ctl.principal_inflight);
    if (ctl.max_inflight > 0 && now > ctl.max_inflight) {
      PrincipalStats::Global().CountQuotaExceeded(PrincipalStats::Quota::kInflight);
      return fail(ResourceExhausted(
          "quota max_inflight of principal " + Quote(ctl.principal) + " reached: it has " +
          std::to_string(now - 1) + " requests in flight, at most " +
          std::to_string(ctl.max_inflight) + "; wait for answers before sending more"));
    }
  }

  // The whole graph, validated before anything is resolved or allocated.
  c.plan = std::make_shared<GraphPlan>();
  GraphPlan& plan = *c.plan;
  GraphLimits limits;
  limits.max_steps = cfg_.max_graph_steps;
  limits.test_ops = cfg_.enable_test_ops;
  limits.max_inline_out_bytes = int64_t{cfg_.max_message_mb} << 20;
  if (Status st = BuildGraphPlan(req, limits, &plan); !st.ok()) return fail(st);

  // Memory before allocation: inline inputs kept, inline outputs built, and
  // the intermediates' arena, against --max_inflight_mb.
  int64_t inline_in = 0;
  for (const auto& [_, t] : req.inputs())
    if (t.data_case() == v1::Tensor::kInlineData)
      inline_in += static_cast<int64_t>(t.inline_data().size());
  const int64_t held = inline_in + plan.inline_out_bytes + plan.arena_bytes;
  if (!budget_->TryReserve(held, &c.memory)) {
    std::string biggest;
    int64_t most = -1;
    for (const GraphValue& v : plan.values)
      if (v.producer >= 0 && v.storage.kind == GraphStorage::Kind::kArena && v.bytes > most) {
        most = v.bytes;
        biggest = plan.StepLabel(static_cast<size_t>(v.producer)) + " output '" +
                  plan.steps[static_cast<size_t>(v.producer)]
                      .op->outputs[static_cast<size_t>(v.output)]
                      .name +
                  "' " + std::string(DTypeName(v.dtype)) + " " + ShapeToString(v.shape) + " (" +
                  HumanBytes(v.bytes) + ")";
      }
    return fail(ResourceExhausted("graph: needs " + HumanBytes(held) + " (" +
                                  HumanBytes(plan.arena_bytes) + " of intermediates" +
                                  (biggest.empty() ? "" : ", the largest " + biggest) +
                                  ") and kerneld holds " + HumanBytes(budget_->used()) +
                                  " for requests in flight; the limit is " +
                                  HumanBytes(budget_->limit()) + " (--max_inflight_mb)"));
  }

  // Graph inputs: inline bytes (realigned when protobuf left them
  // misaligned) or the caller's buffers, pinned until the answer.
  KernelContext task_call;
  task_call.op = &GraphOpDef();
  task_call.inputs.resize(plan.input_names.size());
  int64_t bytes_inline = 0;
  for (size_t i = 0; i < plan.input_names.size(); ++i) {
    const std::string& name = plan.input_names[i];
    const v1::Tensor& t = req.inputs().at(name);
    const GraphValue& gv = plan.values[i];
    TensorView& v = task_call.inputs[i];
    v.dtype = gv.dtype;
    v.shape = gv.shape;
    v.device = Device::Cpu();
    switch (t.data_case()) {
      case v1::Tensor::kInlineData: {
        const std::string& bytes = t.inline_data();
        bytes_inline += static_cast<int64_t>(bytes.size());
        if (reinterpret_cast<uintptr_t>(bytes.data()) % ItemSize(v.dtype) != 0) {
          char* p = c.scratch.Alloc(bytes.size());
          std::memcpy(p, bytes.data(), bytes.size());
          v.data = p;
        } else {
          v.data = const_cast<char*>(bytes.data());  // read-only: steps never write inputs
        }
        break;
      }
      case v1::Tensor::kBuffer: {
        if (buffers_ == nullptr)
          return fail(Status(StatusCode::kUnimplemented, "this server has no buffer registry"));
        RegionPin pin;
        char* p = nullptr;
        Status st = buffers_->Resolve(ctl.principal, t.buffer().buffer_id(), t.buffer().offset(),
                                      static_cast<uint64_t>(gv.bytes), gv.dtype, &pin, &p);
        if (!st.ok())
          return fail(Status(st.code(), "graph input " + Quote(name) + ": " + st.message()));
        v.data = p;
        v.device = pin.region()->device;
        c.pins.push_back(std::move(pin));
        break;
      }
      case v1::Tensor::DATA_NOT_SET:
        v.data = c.scratch.Alloc(0);
        break;
    }
  }

  // Graph outputs: into the response, or into the caller's buffers.
  task_call.outputs.resize(plan.outputs.size());
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const GraphOutputPlan& o = plan.outputs[j];
    const GraphValue& gv = plan.values[static_cast<size_t>(o.value)];
    v1::Tensor& out = (*resp->mutable_outputs())[o.name];
    out.set_dtype(ToProto(gv.dtype));
    for (int64_t s : gv.shape) out.add_shape(s);
    TensorView& v = task_call.outputs[j];
    v.dtype = gv.dtype;
    v.shape = gv.shape;
    v.device = Device::Cpu();
    if (o.to_buffer) {
      if (buffers_ == nullptr)
        return fail(Status(StatusCode::kUnimplemented, "this server has no buffer registry"));
      RegionPin pin;
      char* p = nullptr;
      Status st = buffers_->Resolve(ctl.principal, o.buffer.buffer_id(), o.buffer.offset(),
                                    static_cast<uint64_t>(gv.bytes), gv.dtype, &pin, &p);
      if (!st.ok())
        return fail(Status(st.code(), "graph output " + Quote(o.name) + ": " + st.message()));
      v.data = p;
      v.device = pin.region()->device;
      c.pins.push_back(std::move(pin));
      *out.mutable_buffer() = o.buffer;
    } else {
      std::string* bytes = out.mutable_inline_data();
      bytes->resize(static_cast<size_t>(gv.bytes));
      v.data = bytes->data();
    }
  }

  // Aliasing across steps: an output buffer may not overlap another output,
  // nor an input, except exactly over an input that no step reads after
  // the output's own step wrote it (an in-place update of a buffer).
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    if (!plan.outputs[j].to_buffer || task_call.outputs[j].nbytes() == 0) continue;
    const Range r = RangeOf(task_call.outputs[j]);
    const std::string what = "graph output " + Quote(plan.outputs[j].name);
    for (size_t k = 0; k < j; ++k)
      if (plan.outputs[k].to_buffer && r.Overlaps(RangeOf(task_call.outputs[k])))
        return fail(InvalidArgument(what + " overlaps graph output " + Quote(plan.outputs[k].name) +
                                    " in its buffer"));
    const GraphValue& ov = plan.values[static_cast<size_t>(plan.outputs[j].value)];
    for (size_t i = 0; i < task_call.inputs.size(); ++i) {
      const Range ir = RangeOf(task_call.inputs[i]);
      if (!r.Overlaps(ir)) continue;
      const GraphValue& iv = plan.values[i];
      const GraphStepPlan& producer = plan.steps[static_cast<size_t>(ov.producer)];
      // Read at the producing step only where the kernel reads what it
      // then writes (in place, or an allowed alias of that very input).
      bool ok = r == ir && iv.last_reader <= ov.producer;
      if (ok && iv.last_reader == ov.producer) {
        const OutputDef& od = producer.op->outputs[static_cast<size_t>(ov.output)];
        const std::string& src = !od.in_place_of.empty() ? od.in_place_of : od.may_alias;
        const int src_idx = src.empty() ? -1 : producer.op->InputIndex(src);
        ok = src_idx >= 0 &&
             std::count(producer.inputs.begin(), producer.inputs.end(), static_cast<int>(i)) == 1 &&
             producer.inputs[static_cast<size_t>(src_idx)] == static_cast<int>(i);
      }
      if (!ok)
        return fail(InvalidArgument(
            what + " overlaps graph input " + Quote(plan.input_names[i]) +
            (r == ir ? ", which " + plan.StepLabel(static_cast<size_t>(iv.last_reader)) +
                           " still reads after " +
                           plan.StepLabel(static_cast<size_t>(ov.producer)) + " writes it"
                     : " without covering exactly the same bytes")));
    }
  }

  // Placement as one unit: the device every step can run on, GPUs first
  // (least loaded), the CPU last; the request's device, or the device its
  // buffers live on, when there is one.
  std::vector<DeviceWorker*> candidates;
  if (!req.device().empty()) {
    Status err;
    DeviceWorker* w = devices_.Find(req.device(), &err);
    if (w == nullptr) return fail(err);
    candidates.push_back(w);
  } else {
    for (const auto* vs : {&task_call.inputs, &task_call.outputs})
      for (const TensorView& v : *vs)
        if (v.device.is_cuda())
          for (const auto& w : devices_.workers())
            if (w->info().device == v.device && candidates.empty()) candidates.push_back(w.get());
    if (candidates.empty()) {
      for (const auto& w : devices_.workers())
        if (w->info().device.is_cuda()) candidates.push_back(w.get());
      std::stable_sort(candidates.begin(), candidates.end(), [](DeviceWorker* a, DeviceWorker* b) {
        return a->inflight() + a->queue_depth() < b->inflight() + b->queue_depth();
      });
      for (const auto& w : devices_.workers())
        if (w->info().device.is_cpu()) candidates.push_back(w.get());
    }
  }
  DeviceWorker* worker = nullptr;
  std::vector<const ImplDef*> impls;
  Status first_refusal;
  for (DeviceWorker* w : candidates) {
    const std::string dev = w->info().device.ToString();
    std::vector<const ImplDef*> chosen;
    Status refusal;
    for (size_t i = 0; i < plan.steps.size() && refusal.ok(); ++i) {
      const GraphStepPlan& st = plan.steps[i];
      KernelContext probe;
      probe.op = st.op;
      probe.attrs = st.attrs;
      auto view = [&](int id) {
        const GraphValue& gv = plan.values[static_cast<size_t>(id)];
        if (gv.storage.kind == GraphStorage::Kind::kInput)
          return task_call.inputs[static_cast<size_t>(gv.storage.index)];
        if (gv.storage.kind == GraphStorage::Kind::kOutput)
          return task_call.outputs[static_cast<size_t>(gv.storage.index)];
        TensorView t;  // an intermediate: fresh aligned memory on the device
        t.dtype = gv.dtype;
        t.shape = gv.shape;
        t.device = w->info().device;
        return t;
      };
      for (int id : st.inputs) probe.inputs.push_back(view(id));
      for (int id : st.outputs) probe.outputs.push_back(view(id));
      Placement place;
      Status ps = scheduler_.Place(*st.op, probe, st.backend, dev, &place);
      if (!ps.ok())
        refusal =
            Status(ps.code(), plan.StepLabel(i) + " cannot run on " + dev + ": " + ps.message());
      else
        chosen.push_back(place.impl);
    }
    if (refusal.ok()) {
      worker = w;
      impls = std::move(chosen);
      break;
    }
    if (first_refusal.ok()) first_refusal = refusal;
  }
  if (worker == nullptr)
    return fail(first_refusal.ok() ? FailedPrecondition("graph: no device to run it on")
                                   : first_refusal);
  resp->mutable_info()->set_decoded_ns(NsSince(c.arrival));
  resp->set_intermediate_bytes(plan.arena_bytes);

  const DeviceInfo& dev = worker->info();
  c.series = metrics_.For("graph", impls.front()->backend, DeviceManager::Label(dev));
  c.device_id = dev.device.ToString();
  // What names each graph tensor's memory across calls, for replay: a
  // device buffer by its id and offset; host memory (inline bytes, shared
  // memory) is staged by the worker at addresses that change every call.
  GraphReplayOptions replay;
  if (dev.device.is_cuda()) {
    replay.cache_entries = cfg_.graph_cache_entries;
    for (size_t i = 0; i < plan.input_names.size(); ++i) {
      const v1::Tensor& t = req.inputs().at(plan.input_names[i]);
      replay.inputs.push_back(
          t.data_case() == v1::Tensor::kBuffer && task_call.inputs[i].device.is_cuda()
              ? t.buffer().buffer_id() + "+" + std::to_string(t.buffer().offset())
              : std::string());
    }
    for (size_t j = 0; j < plan.outputs.size(); ++j) {
      const GraphOutputPlan& o = plan.outputs[j];
      replay.outputs.push_back(o.to_buffer && task_call.outputs[j].device.is_cuda()
                                   ? o.buffer.buffer_id() + "+" + std::to_string(o.buffer.offset())
                                   : std::string());
    }
  }
  c.impl = MakeGraphImpl(c.plan, impls, dev.device.kind, impls.front()->backend, std::move(replay));

  auto task = std::make_unique<Task>();
  task->call = std::move(task_call);
  task->impl = &c.impl;
  task->arrival = c.arrival;
  task->bytes = bytes_inline + plan.inline_out_bytes;
  task->deadline = ctl.deadline;
  task->cancelled = std::move(ctl.cancelled);
  task->done = [call](Status st, const TaskTiming& timing) {
    Call& k = *call;
    if (st.ok()) st = CheckPinsAfterUse(k.pins);
    SetExecutionInfo(k.impl.backend, k.device_id, timing, k.resp->mutable_info());
    Metrics& metrics = k.runner->metrics_;
    metrics.ObserveRequest(k.series, st.code(), static_cast<double>(NsSince(k.arrival)) * 1e-9);
    if (timing.executed)
      metrics.ObserveQueueAndExecute(k.series, static_cast<double>(timing.queue_ns) * 1e-9,
                                     static_cast<double>(timing.execute_ns) * 1e-9);
    k.Done(st);
  };
  if (!worker->Submit(task))
    fail(ResourceExhausted("graph: " + c.device_id + " queue is full (" +
                           std::to_string(worker->capacity()) +
                           " requests waiting); retry with backoff, or raise --queue_capacity"),
         c.impl.backend, DeviceManager::Label(dev));
}

}  // namespace kerneld::server
