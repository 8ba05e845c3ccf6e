#include "service/request_runner.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include <exception>
#include <new>

#include "kerneld/check.h"
#include "kerneld/size.h"
#include "service/request_decode.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

using Clock = std::chrono::steady_clock;

int64_t NsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

}  // namespace

RequestRunner::RequestRunner(const Config& cfg, DeviceManager& devices, Metrics& metrics, BufferRegistry* buffers,
                             RequestLog* log, TraceWriter* trace)
    : cfg_(cfg),
      devices_(devices),
      scheduler_(devices),
      metrics_(metrics),
      buffers_(buffers),
      log_(log),
      trace_(trace),
      budget_(int64_t{cfg.max_inflight_mb} << 20) {}

void RequestRunner::Start(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
                          std::function<void(const Status&)> user_done) {
  inflight_.fetch_add(1);
  // `done` runs once whatever happens below, so the in-flight count always
  // returns to zero (drain waits on it).
  auto finished = std::make_shared<std::atomic<bool>>(false);
  DoneFn done = [this, finished, user_done = std::move(user_done)](const Status& st) {
    if (finished->exchange(true)) return;
    user_done(st);
    inflight_.fetch_sub(1);
  };
  // No exception may escape into gRPC: it answered UNIMPLEMENTED with an
  // empty message and the in-flight count never returned to zero.
  Status thrown;
  try {
    StartImpl(req, resp, std::move(ctl), done);
    return;
  } catch (const std::bad_alloc&) {
    thrown = ResourceExhausted(Sanitize(req.op()) + ": kerneld ran out of host memory for this request; retry "
                               "later or send a smaller one");
  } catch (const std::exception& e) {
    thrown = Internal(Sanitize(req.op()) + ": " + Sanitize(e.what()));
  }
  if (finished->load()) return;
  resp->clear_outputs();
  resp->mutable_status()->set_code(static_cast<int>(thrown.code()));
  resp->mutable_status()->set_message(thrown.message());
  done(thrown);
}

void RequestRunner::StartImpl(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
                              const DoneFn& done) {
  const auto arrival = Clock::now();
  resp->set_request_id(req.request_id());

  const int64_t arrival_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(arrival.time_since_epoch()).count();
  const bool traced = trace_ != nullptr && trace_->Sample();

  auto fail = [&](const Status& st, const std::string& op_label, const std::string& backend,
                  const std::string& device) {
    resp->clear_outputs();
    resp->mutable_status()->set_code(static_cast<int>(st.code()));
    resp->mutable_status()->set_message(st.message());
    auto* info = resp->mutable_info();
    info->set_total_ns(NsSince(arrival));
    metrics_.ObserveRequest(metrics_.For(op_label, backend, device), st.code(),
                            static_cast<double>(info->total_ns()) * 1e-9);
    if (log_ != nullptr && log_->level() >= 1) {
      RequestRecord r;
      r.request_id = req.request_id();
      r.op = req.op();
      r.backend = backend;
      r.device = device;
      r.code = std::string(StatusCodeName(st.code()));
      r.message = st.message();
      r.total_ns = info->total_ns();
      log_->Finish(r);
    }
    if (traced) trace_->Record(req, *resp, arrival_ns);
    done(st);
  };

  if (draining_.load()) {
    fail(Unavailable("kerneld is shutting down and accepts no new requests; retry on another "
                     "replica"),
         OpRegistry::Global().Find(req.op()) ? req.op() : "_unknown", "none", "none");
    return;
  }
  auto d = std::make_shared<DecodedRequest>();
  DecodeOptions opt;
  opt.test_ops = cfg_.enable_test_ops;
  opt.max_inline_out_bytes = int64_t{cfg_.max_message_mb} << 20;
  opt.budget = &budget_;
  if (Status st = DecodeRequest(req, resp, opt, buffers_, ctl.principal, d.get()); !st.ok()) {
    // Only registered op names become label values: clients cannot mint series.
    fail(st, d->op ? d->op->name : "_unknown", "none", "none");
    return;
  }

  KernelContext probe;
  probe.op = d->op;
  probe.inputs = d->inputs;
  probe.outputs = d->outputs;
  probe.attrs = d->attrs;
  Placement place;
  if (Status st = scheduler_.Place(*d->op, probe, req.backend(), req.device(), &place); !st.ok()) {
    fail(st, d->op->name, "none", "none");
    return;
  }

  // Inline tensors are staged into device memory on a GPU: refuse up front
  // what could never fit there, rather than failing an allocation later.
  if (const DeviceInfo& dev = place.worker->info(); dev.device.is_cuda() && dev.total_memory > 0) {
    const int64_t staged = static_cast<int64_t>(d->bytes_in_inline + d->bytes_out_inline);
    if (staged > dev.total_memory) {
      fail(ResourceExhausted(d->op->name + ": its inline tensors need " + HumanBytes(staged) + " on " +
                             dev.device.ToString() + ", which has " + HumanBytes(dev.total_memory) +
                             "; use registered buffers or a smaller request"),
           d->op->name, place.impl->backend, DeviceManager::Label(dev));
      return;
    }
  }

  const std::string backend = place.impl->backend;
  const std::string device_id = place.worker->info().device.ToString();
  const std::string device_label = DeviceManager::Label(place.worker->info());
  // Level 3 writes the request before it runs: a crash still names it.
  auto record = std::make_shared<RequestRecord>();
  if (log_ != nullptr && log_->level() >= 1) {
    record->request_id = req.request_id();
    record->op = d->op->name;
    record->backend = backend;
    record->device = device_id;
    record->opdef = d->op;
    record->inputs = &d->inputs;
    record->outputs = &d->outputs;
    record->attrs = &d->attrs;
    log_->Start(*record);
  }

  auto task = std::make_unique<Task>();
  task->op = d->op;
  task->impl = place.impl;
  task->inputs = d->inputs;
  task->outputs = d->outputs;
  task->attrs = d->attrs;
  task->arrival = arrival;
  task->deadline = ctl.deadline;
  task->cancelled = ctl.cancelled;
  RequestLog* log = log_;
  TraceWriter* trace = traced ? trace_ : nullptr;
  const v1::ExecuteRequest* reqp = &req;
  Metrics* metrics = &metrics_;
  Metrics::Series* series = metrics_.For(d->op->name, backend, device_label);
  task->done = [d, resp, done, arrival, arrival_ns, device_id, log, trace, reqp, record, metrics, series](
                   Status st, const TaskTiming& timing) {
    // A client that shrank its shared memory while the kernel ran got zeros
    // mapped under it (buffers/shm_source.cc): the result is not to be trusted.
    if (st.ok()) st = CheckPinsAfterUse(d->pins);
    auto* info = resp->mutable_info();
    info->set_backend(record->backend.empty() ? series->backend : record->backend);
    info->set_device(device_id);
    info->set_queue_ns(timing.queue_ns);
    info->set_execute_ns(timing.execute_ns);
    if (!st.ok()) resp->clear_outputs();
    resp->mutable_status()->set_code(static_cast<int>(st.code()));
    resp->mutable_status()->set_message(st.message());
    info->set_total_ns(NsSince(arrival));
    metrics->ObserveRequest(series, st.code(), static_cast<double>(info->total_ns()) * 1e-9);
    if (timing.executed)
      metrics->ObserveQueueAndExecute(series, static_cast<double>(timing.queue_ns) * 1e-9,
                                      static_cast<double>(timing.execute_ns) * 1e-9);
    if (st.ok()) {
      metrics->AddTransferred(true, false, d->bytes_in_inline);
      metrics->AddTransferred(true, true, d->bytes_in_buffer);
      metrics->AddTransferred(false, false, d->bytes_out_inline);
      metrics->AddTransferred(false, true, d->bytes_out_buffer);
    }
    if (log != nullptr && log->level() >= 1) {
      record->code = std::string(StatusCodeName(st.code()));
      if (!st.ok()) record->message = st.message();
      record->queue_ns = timing.queue_ns;
      record->execute_ns = timing.execute_ns;
      record->total_ns = info->total_ns();
      log->Finish(*record);
    }
    if (trace != nullptr) trace->Record(*reqp, *resp, arrival_ns);
    done(st);
  };
  if (!place.worker->Submit(task)) {
    fail(ResourceExhausted(d->op->name + ": " + device_id + " queue is full (" +
                           std::to_string(place.worker->capacity()) +
                           " requests waiting); retry with backoff, or raise --queue_capacity"),
         d->op->name, backend, device_label);
  }
}

}  // namespace kerneld::server
