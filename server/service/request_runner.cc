#include "service/request_runner.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include "auth/principal_stats.h"
#include "kerneld/check.h"
#include "kerneld/size.h"
#include "service/execution_info.h"
#include "service/request_decode.h"
#include "service/start_status.h"
#include "service/tensor_codec.h"
#include "scheduler/tuning_setup.h"

namespace kerneld::server {

namespace {

using Clock = std::chrono::steady_clock;

// The trace's time base: the steady clock's epoch.
int64_t ArrivalNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

// Everything one request needs until its completion, in one allocation
// shared by the submitting path and the task's completion.
struct RequestRunner::Call {
  Call(RequestRunner* r, const v1::ExecuteRequest& q, v1::ExecuteResponse* p, DoneFn&& done,
       Clock::time_point t)
      : runner(r), req(q), resp(p), user_done(std::move(done)), arrival(t) {}

  // Hands the response to gRPC once, whatever happens; the in-flight count
  // then returns to zero (drain waits on it).
  void Done(const Status& st) {
    if (finished.exchange(true)) return;
    // Released before the answer: the client's next request must find it free.
    if (principal_inflight) principal_inflight->fetch_sub(1);
    user_done(st);
    runner->inflight_.fetch_sub(1);
  }
  // total_ns and completed_ns: one clock read, the last before the metrics,
  // the log and the hand-off (so completed_ns == total_ns).
  int64_t StampCompleted() {
    const int64_t now = NsSince(arrival);
    v1::ExecutionInfo* info = resp->mutable_info();
    info->set_total_ns(now);
    info->set_completed_ns(now);
    return now;
  }

  RequestRunner* runner;
  const v1::ExecuteRequest& req;
  v1::ExecuteResponse* resp;
  DoneFn user_done;
  std::atomic<bool> finished{false};
  Clock::time_point arrival;
  bool traced = false;
  // The decoded call and the memory it holds (pins, scratch, budget); its
  // KernelContext moves into the task at Submit.
  DecodedRequest d;
  RequestRecord record;  // filled only when logging is on; reads the task's views
  const Target* target = nullptr;
  // The `transport` label of its series.
  Transport transport = Transport::kGrpc;
  Principal principal;  // for the log and the trace; never a metric label
  std::shared_ptr<std::atomic<int64_t>> principal_inflight;
  TuningTicket ticket;  // the scheduler's decision, given back with the run's time
};

RequestRunner::RequestRunner(const Config& cfg, DeviceManager& devices, Metrics& metrics,
                             BufferRegistry* buffers, RequestLog* log, TraceWriter* trace)
    : cfg_(cfg),
      devices_(devices),
      scheduler_(devices, TuningOptionsFrom(cfg)),
      metrics_(metrics),
      buffers_(buffers),
      log_(log),
      trace_(trace),
      budget_(int64_t{cfg.max_inflight_mb} << 20) {}

const RequestRunner::Target& RequestRunner::TargetFor(const OpDef& op, const ImplDef& impl,
                                                      const DeviceWorker& worker) {
  const auto key = std::make_pair(&impl, &worker);
  {
    std::shared_lock lock(targets_mu_);
    if (auto it = targets_.find(key); it != targets_.end()) return it->second;
  }
  Target t;
  for (size_t i = 0; i < t.series.size(); ++i)
    t.series[i] = metrics_.For(op.name, impl.backend, DeviceManager::Label(worker.info()),
                               static_cast<Transport>(i));
  t.device_id = worker.info().device.ToString();
  std::unique_lock lock(targets_mu_);
  return targets_.try_emplace(key, std::move(t)).first->second;  // references survive rehashing
}

void RequestRunner::Start(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
                          std::function<void(const Status&)> user_done) {
  const auto arrival = Clock::now();
  inflight_.fetch_add(1);
  std::shared_ptr<Call> call;
  const Status thrown = StartStatus(Sanitize(req.op()), [&] {
    call = std::make_shared<Call>(this, req, resp, std::move(user_done), arrival);
    StartImpl(call, std::move(ctl));
  });
  if (thrown.ok()) return;
  if (call != nullptr && call->finished.load()) return;
  resp->clear_outputs();
  resp->mutable_status()->set_code(static_cast<int>(thrown.code()));
  resp->mutable_status()->set_message(thrown.message());
  if (call != nullptr) {
    call->Done(thrown);
  } else {  // the Call itself could not be allocated; user_done was not moved
    user_done(thrown);
    inflight_.fetch_sub(1);
  }
}

// The walk, step by step: refuse, decode, place, submit; the task's done
// completes it. Each step that ends the request answers it itself (Fail).
void RequestRunner::StartImpl(const std::shared_ptr<Call>& call, CallControl ctl) {
  Call& c = *call;
  c.resp->set_request_id(c.req.request_id());
  c.traced = trace_ != nullptr && trace_->Sample();
  c.principal = ctl.principal;
  c.transport = ctl.transport;
  if (Refuse(c, ctl)) return;
  if (!Decode(c)) return;
  Placement place;
  if (!Place(c, &place)) return;
  Submit(call, place, ctl);
}

// Refusals (formatted, counted, logged): not the fast path.
void RequestRunner::Fail(Call& c, const Status& st, const std::string& op_label,
                         const std::string& backend, const std::string& device) {
  v1::ExecuteResponse* resp = c.resp;
  resp->clear_outputs();
  resp->mutable_status()->set_code(static_cast<int>(st.code()));
  resp->mutable_status()->set_message(st.message());
  const int64_t total_ns = c.StampCompleted();
  metrics_.ObserveRequest(metrics_.For(op_label, backend, device, c.transport), st.code(),
                          static_cast<double>(total_ns) * 1e-9);
  if (log_ != nullptr && log_->level() >= 1) {
    RequestRecord r;
    r.request_id = c.req.request_id();
    r.op = c.req.op();
    r.backend = backend;
    r.device = device;
    r.code = std::string(StatusCodeName(st.code()));
    r.message = st.message();
    r.total_ns = total_ns;
    r.principal = c.principal;
    log_->Finish(r);
  }
  if (c.traced) trace_->Record(c.req, *resp, ArrivalNs(c.arrival), c.principal);
  c.Done(st);
}

// Admission, before a byte is decoded: drain, authentication, and the
// principal's in-flight quota (counted here, released by Call::Done).
bool RequestRunner::Refuse(Call& c, CallControl& ctl) {
  // Only registered op names become label values: clients cannot mint series.
  const auto op_label = [&] {
    return OpRegistry::Global().Find(c.req.op()) ? c.req.op() : std::string("_unknown");
  };
  if (draining_.load()) {
    Fail(c,
         Unavailable("kerneld is shutting down and accepts no new requests; retry on another "
                     "replica"),
         op_label(), "none", "none");
    return true;
  }
  if (!ctl.refused.ok()) {
    Fail(c, ctl.refused, "_unknown", "none", "none");
    return true;
  }
  if (ctl.principal_inflight) {  // --quota_inflight / max_inflight=
    const int64_t now = ctl.principal_inflight->fetch_add(1) + 1;
    c.principal_inflight = std::move(ctl.principal_inflight);
    if (ctl.max_inflight > 0 && now > ctl.max_inflight) {
      PrincipalStats::Global().CountQuotaExceeded(PrincipalStats::Quota::kInflight);
      Fail(c,
           ResourceExhausted(
               "quota max_inflight of principal " + Quote(ctl.principal) + " reached: it has " +
               std::to_string(now - 1) + " requests in flight, at most " +
               std::to_string(ctl.max_inflight) +
               "; wait for answers before sending more, or ask the operator to raise it "
               "(--quota_inflight or max_inflight= in the token file)"),
           op_label(), "none", "none");
      return true;
    }
  }
  return false;
}

// The request into its decoded call (request_decode.cc): views resolved,
// validated, outputs laid out in the response or the client's buffers.
bool RequestRunner::Decode(Call& c) {
  DecodeOptions opt;
  opt.test_ops = cfg_.enable_test_ops;
  opt.max_inline_out_bytes = int64_t{cfg_.max_message_mb} << 20;
  opt.budget = &budget_;
  if (Status st = DecodeRequest(c.req, c.resp, opt, buffers_, c.principal, &c.d); !st.ok()) {
    Fail(c, st, c.d.call.op ? c.d.call.op->name : "_unknown", "none", "none");
    return false;
  }
  c.resp->mutable_info()->set_decoded_ns(NsSince(c.arrival));
  return true;
}

// An implementation and a device for the decoded call, read in place; and
// what could never fit there refused up front.
bool RequestRunner::Place(Call& c, Placement* place) {
  const DecodedRequest& d = c.d;
  const OpDef& op = *d.call.op;
  if (Status st = scheduler_.Place(op, d.call, c.req.backend(), c.req.device(), place); !st.ok()) {
    Fail(c, st, op.name, "none", "none");
    return false;
  }
  // Inline tensors are staged into device memory on a GPU: refuse up front
  // what could never fit there, rather than failing an allocation later.
  if (const DeviceInfo& dev = place->worker->info(); dev.device.is_cuda() && dev.total_memory > 0) {
    const int64_t staged = static_cast<int64_t>(d.bytes_in_inline + d.bytes_out_inline);
    if (staged > dev.total_memory) {
      Fail(c,
           ResourceExhausted(op.name + ": its inline tensors need " + HumanBytes(staged) + " on " +
                             dev.device.ToString() + ", which has " + HumanBytes(dev.total_memory) +
                             "; use registered buffers or a smaller request"),
           op.name, place->impl->backend, DeviceManager::Label(dev));
      return false;
    }
  }
  c.target = &TargetFor(op, *place->impl, *place->worker);
  c.ticket = place->ticket;
  return true;
}

// The decoded call moves into a task (a copy allocates every shape) for
// the placed worker; the task's done completes the request.
void RequestRunner::Submit(const std::shared_ptr<Call>& call, const Placement& place,
                           CallControl& ctl) {
  Call& c = *call;
  DecodedRequest& d = c.d;
  auto task = std::make_unique<Task>();
  task->call = std::move(d.call);
  task->impl = place.impl;
  task->arrival = c.arrival;
  task->bytes = static_cast<int64_t>(d.bytes_in_inline + d.bytes_in_buffer + d.bytes_out_inline +
                                     d.bytes_out_buffer);
  task->deadline = ctl.deadline;
  task->cancelled = std::move(ctl.cancelled);
  task->priority = c.req.priority();
  task->principal = c.principal;
  task->estimate_ns = place.estimate_ns;
  const OpDef& op = *task->call.op;
  // Level 3 writes the request before it runs: a crash still names it. The
  // record reads the task's own views, which outlive its done.
  if (log_ != nullptr && log_->level() >= 1) {
    RequestRecord& r = c.record;
    r.request_id = c.req.request_id();
    r.op = op.name;
    r.backend = place.impl->backend;
    r.device = c.target->device_id;
    r.opdef = &op;
    r.inputs = &task->call.inputs;
    r.outputs = &task->call.outputs;
    r.attrs = &task->call.attrs;
    r.principal = c.principal;
    log_->Start(r);
  }
  // One shared_ptr captured: the std::function holds it without allocating.
  task->done = [call](Status st, const TaskTiming& timing) {
    call->runner->Complete(*call, std::move(st), timing);
  };
  if (!place.worker->Submit(task)) {
    Fail(c,
         ResourceExhausted(op.name + ": " + c.target->device_id + " queue is full (" +
                           std::to_string(place.worker->capacity()) +
                           " requests waiting); retry with backoff, or raise --queue_capacity"),
         op.name, place.impl->backend, DeviceManager::Label(place.worker->info()));
  }
}

// The response (info, status), the metrics, the log and the trace, then
// the hand-off to gRPC; on a worker thread, or inline in Submit.
void RequestRunner::Complete(Call& k, Status st, const TaskTiming& timing) {
  const Target& target = *k.target;
  // A client that shrank its shared memory while the kernel ran got zeros
  // mapped under it (buffers/shm_source.cc): the result is not to be trusted.
  if (st.ok()) st = CheckPinsAfterUse(k.d.pins);
  if (st.ok() && timing.executed) scheduler_.Record(k.ticket, timing.execute_ns);
  Metrics::Series* series = target.series[static_cast<size_t>(k.transport)];
  SetExecutionInfo(series->backend, target.device_id, timing, k.resp->mutable_info());
  if (!st.ok()) k.resp->clear_outputs();
  k.resp->mutable_status()->set_code(static_cast<int>(st.code()));
  if (!st.ok()) k.resp->mutable_status()->set_message(st.message());
  const int64_t total_ns = k.StampCompleted();
  metrics_.ObserveRequest(series, st.code(), static_cast<double>(total_ns) * 1e-9);
  if (timing.executed)
    metrics_.ObserveQueueAndExecute(series, static_cast<double>(timing.queue_ns) * 1e-9,
                                    static_cast<double>(timing.execute_ns) * 1e-9);
  if (st.ok()) {
    const DecodedRequest& kd = k.d;
    metrics_.AddTransferred(true, false, kd.bytes_in_inline);
    metrics_.AddTransferred(true, true, kd.bytes_in_buffer);
    metrics_.AddTransferred(false, false, kd.bytes_out_inline);
    metrics_.AddTransferred(false, true, kd.bytes_out_buffer);
  }
  if (log_ != nullptr && log_->level() >= 1) {
    RequestRecord& r = k.record;
    r.code = std::string(StatusCodeName(st.code()));
    if (!st.ok()) r.message = st.message();
    r.queue_ns = timing.queue_ns;
    r.execute_ns = timing.execute_ns;
    r.total_ns = total_ns;
    log_->Finish(r);
  }
  if (k.traced) trace_->Record(k.req, *k.resp, ArrivalNs(k.arrival), k.principal);
  k.Done(st);
}

}  // namespace kerneld::server
