#include "service/request_runner.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include "kerneld/check.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

using Clock = std::chrono::steady_clock;

int64_t NsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

std::string NameList(const std::vector<std::string>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "}";
}

// Memory a request owns while it runs: realigned copies of inline inputs.
struct Scratch {
  std::vector<std::unique_ptr<char[]>> blocks;
  char* Alloc(size_t n) {
    // 64-byte aligned, as the vectorized CPU kernels like it.
    blocks.emplace_back(new (std::align_val_t{64}) char[n > 0 ? n : 1]);
    return blocks.back().get();
  }
};

// Decoded request, before scheduling.
struct Decoded {
  const OpDef* op = nullptr;
  AttrMap attrs;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  std::shared_ptr<Scratch> scratch = std::make_shared<Scratch>();
  std::vector<RegionPin> pins;  // regions this request uses, held until it completes
  uint64_t bytes_in_inline = 0, bytes_in_buffer = 0, bytes_out_inline = 0, bytes_out_buffer = 0;
};

// Where a BufferRef points, checked: the region, its device, the pointer.
Status ResolveRef(BufferRegistry* reg, const Principal& who, const std::string& what, const v1::BufferRef& ref,
                  int64_t nbytes, DType dt, Decoded* d, TensorView* v) {
  if (reg == nullptr) return {StatusCode::kUnimplemented, what + ": this server has no buffer registry"};
  RegionPin pin;
  char* p = nullptr;
  Status st =
      reg->Resolve(who, ref.buffer_id(), ref.offset(), static_cast<uint64_t>(nbytes), dt, &pin, &p);
  if (!st.ok()) return Status(st.code(), what + ": " + st.message());
  v->data = p;
  v->byte_offset = 0;
  v->device = pin.region()->device;
  d->pins.push_back(std::move(pin));
  return Status::Ok();
}

Status Decode(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, bool test_ops, BufferRegistry* reg,
              const Principal& who, Decoded* d) {
  const OpDef* op = OpRegistry::Global().Find(req.op());
  if (op != nullptr && op->test_only() && !test_ops) op = nullptr;
  if (op == nullptr) {
    std::vector<std::string> names;
    for (const OpDef* o : OpRegistry::Global().List())
      if (!o->test_only() || test_ops) names.push_back(o->name);
    if (req.op().empty()) return InvalidArgument("ExecuteRequest.op is empty; ops are " + NameList(names));
    return NotFound("unknown op '" + req.op() + "'; this server has " + NameList(names) +
                    " (ListKernels describes them)");
  }
  d->op = op;

  AttrMap given;
  for (const auto& [name, v] : req.attrs()) {
    AttrValue a;
    KERNELD_RETURN_IF_ERROR(FromProto(op->name + ": attr '" + name + "'", v, &a));
    given.emplace(name, std::move(a));
  }
  KERNELD_RETURN_IF_ERROR(ResolveAttrs(*op, given, &d->attrs));

  // Inputs, in schema order; a missing one keeps dtype kInvalid and is
  // reported by ValidateInputs.
  d->inputs.assign(op->inputs.size(), TensorView{});
  for (const auto& [name, t] : req.inputs()) {
    int idx = op->InputIndex(name);
    if (idx < 0) {
      std::vector<std::string> names;
      for (const auto& i : op->inputs) names.push_back(i.name);
      return InvalidArgument(op->name + ": unknown input '" + name + "'; inputs are " + NameList(names));
    }
    const std::string what = op->name + ": input '" + name + "'";
    int64_t nbytes = 0;
    KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
    TensorView& v = d->inputs[static_cast<size_t>(idx)];
    v.dtype = FromProto(t.dtype());
    v.shape.assign(t.shape().begin(), t.shape().end());
    v.device = Device::Cpu();
    switch (t.data_case()) {
      case v1::Tensor::kInlineData: {
        const std::string& bytes = t.inline_data();
        d->bytes_in_inline += bytes.size();
        if (static_cast<int64_t>(bytes.size()) != nbytes)
          return InvalidArgument(what + ": inline_data has " + std::to_string(bytes.size()) +
                                 " bytes; " + std::string(DTypeName(v.dtype)) + " " +
                                 ShapeToString(v.shape) + " needs " + std::to_string(nbytes) +
                                 " (elements x itemsize)");
        if (reinterpret_cast<uintptr_t>(bytes.data()) % ItemSize(v.dtype) != 0) {
          // Protobuf gives no alignment promise; kernels need natural alignment.
          char* p = d->scratch->Alloc(bytes.size());
          std::memcpy(p, bytes.data(), bytes.size());
          v.data = p;
        } else {
          v.data = const_cast<char*>(bytes.data());  // read-only use
        }
        break;
      }
      case v1::Tensor::kBuffer:
        KERNELD_RETURN_IF_ERROR(ResolveRef(reg, who, what, t.buffer(), nbytes, v.dtype, d, &v));
        d->bytes_in_buffer += static_cast<uint64_t>(nbytes);
        break;
      case v1::Tensor::DATA_NOT_SET:
        if (nbytes != 0)
          return InvalidArgument(what + " has no data; set inline_data (" + std::to_string(nbytes) +
                                 " bytes) or buffer");
        v.data = d->scratch->Alloc(0);
        break;
    }
  }

  ShapeBindings bind;
  KERNELD_RETURN_IF_ERROR(ValidateInputs(*op, d->inputs, d->attrs, &bind));
  std::vector<OutputSpec> specs;
  KERNELD_RETURN_IF_ERROR(InferOutputs(*op, d->inputs, d->attrs, bind, &specs));

  for (const auto& [name, t] : req.outputs()) {
    int idx = op->OutputIndex(name);
    if (idx < 0) {
      std::vector<std::string> names;
      for (const auto& o : op->outputs) names.push_back(o.name);
      return InvalidArgument(op->name + ": unknown output '" + name + "'; outputs are " + NameList(names));
    }
    const std::string what = op->name + ": output '" + name + "'";
    int64_t nbytes = 0;
    KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
    TensorView declared;
    declared.dtype = FromProto(t.dtype());
    declared.shape.assign(t.shape().begin(), t.shape().end());
    KERNELD_RETURN_IF_ERROR(CheckOutput(*op, idx, specs[static_cast<size_t>(idx)], declared));
    if (t.data_case() == v1::Tensor::kBuffer && !op->outputs[static_cast<size_t>(idx)].in_place_of.empty())
      return InvalidArgument(what + " is written in place of input '" +
                             op->outputs[static_cast<size_t>(idx)].in_place_of +
                             "'; it cannot be placed elsewhere (leave it out of outputs)");
    if (t.data_case() == v1::Tensor::kInlineData)
      return InvalidArgument(what + ": outputs take no inline_data; leave data unset to receive "
                                    "the result inline, or name a buffer to have it written there");
  }

  // Outputs are computed straight into the response's bytes (no extra copy).
  // An in-place output starts as a copy of its input, and the kernel then
  // reads and writes that copy: the request's bytes are never modified.
  d->outputs.assign(op->outputs.size(), TensorView{});
  for (size_t i = 0; i < op->outputs.size(); ++i) {
    const OutputDef& od = op->outputs[i];
    const OutputSpec& spec = specs[i];
    v1::Tensor& out = (*resp->mutable_outputs())[od.name];
    out.set_dtype(ToProto(spec.dtype));
    for (int64_t s : spec.shape) out.add_shape(s);
    int64_t nbytes = *CheckedNumel(spec.shape) * static_cast<int64_t>(ItemSize(spec.dtype));
    TensorView& v = d->outputs[i];
    v.dtype = spec.dtype;
    v.shape = spec.shape;
    v.device = Device::Cpu();
    auto placed = req.outputs().find(od.name);
    const bool in_buffer = (!od.in_place_of.empty() &&
                            req.inputs().at(od.in_place_of).data_case() == v1::Tensor::kBuffer) ||
                           (placed != req.outputs().end() && placed->second.data_case() == v1::Tensor::kBuffer);
    (in_buffer ? d->bytes_out_buffer : d->bytes_out_inline) += static_cast<uint64_t>(nbytes);
    if (!od.in_place_of.empty()) {
      const int in_idx = op->InputIndex(od.in_place_of);
      TensorView& in = d->inputs[static_cast<size_t>(in_idx)];
      const v1::Tensor& in_t = req.inputs().at(od.in_place_of);
      if (in_t.data_case() == v1::Tensor::kBuffer) {
        *out.mutable_buffer() = in_t.buffer();  // written in place, in the client's buffer
        v.data = in.data;
        v.byte_offset = in.byte_offset;
        v.device = in.device;
      } else {
        std::string* bytes = out.mutable_inline_data();
        bytes->assign(static_cast<const char*>(in.raw()), static_cast<size_t>(in.nbytes()));
        in.data = bytes->data();
        in.byte_offset = 0;
        v.data = bytes->data();
      }
    } else if (placed != req.outputs().end() && placed->second.data_case() == v1::Tensor::kBuffer) {
      KERNELD_RETURN_IF_ERROR(ResolveRef(reg, who, op->name + ": output '" + od.name + "'", placed->second.buffer(),
                                         nbytes, spec.dtype, d, &v));
      *out.mutable_buffer() = placed->second.buffer();
    } else {
      std::string* bytes = out.mutable_inline_data();
      bytes->resize(static_cast<size_t>(nbytes));
      v.data = bytes->data();
    }
  }
  // Outputs placed in buffers must not partly overlap inputs or each other:
  // a kernel may read an element after another thread overwrote it. Exact
  // aliasing is allowed where the schema says so (in place, may_alias).
  for (size_t i = 0; i < d->outputs.size(); ++i) {
    const OutputDef& od = op->outputs[i];
    const TensorView& o = d->outputs[i];
    if (!od.in_place_of.empty()) continue;
    for (size_t j = 0; j < d->inputs.size(); ++j) {
      const TensorView& in = d->inputs[j];
      if (!o.Overlaps(in)) continue;
      if (od.may_alias == op->inputs[j].name && o.SameMemory(in)) continue;
      return InvalidArgument(op->name + ": output '" + od.name + "' overlaps input '" + op->inputs[j].name +
                             "' in its buffer" +
                             (od.may_alias == op->inputs[j].name ? " without covering exactly the same bytes"
                                                                  : "; this op cannot write over that input"));
    }
    for (size_t j = 0; j < i; ++j)
      if (o.Overlaps(d->outputs[j]))
        return InvalidArgument(op->name + ": outputs '" + op->outputs[j].name + "' and '" + od.name + "' overlap");
  }
  return Status::Ok();
}

}  // namespace

void RequestRunner::Start(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
                          std::function<void(const Status&)> user_done) {
  const auto arrival = Clock::now();
  resp->set_request_id(req.request_id());
  inflight_.fetch_add(1);
  auto done = [this, user_done = std::move(user_done)](const Status& st) {
    user_done(st);
    inflight_.fetch_sub(1);
  };

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
  auto d = std::make_shared<Decoded>();
  if (Status st = Decode(req, resp, cfg_.enable_test_ops, buffers_, ctl.principal, d.get()); !st.ok()) {
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
  task->done = [d, resp, done, arrival, arrival_ns, device_id, log, trace, reqp, record, metrics,
                series](Status st, const TaskTiming& timing) {
    // A client that shrank its shared memory under the kernel voids the results.
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
