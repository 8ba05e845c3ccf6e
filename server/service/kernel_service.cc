#include "service/kernel_service.h"

#include "auth/authenticator.h"
#include "auth/principal_stats.h"
#include "build_info.h"
#include "graph/graph_runner.h"
#include "service/tuning_info.h"
#include "service/buffer_service.h"
#include "service/execute_stream.h"
#include "service/library_log.h"
#include "service/raw_unary.h"
#include "service/tensor_codec.h"
#include "sandbox/user_kernels.h"

namespace kerneld::server {

grpc::Status ToGrpc(const Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
}

CallControl ControlFor(grpc::ServerContextBase* ctx) {
  CallControl c;
  c.deadline = ctx->deadline();
  c.cancelled = [ctx] { return ctx->IsCancelled(); };
  Identity id;
  if (Status st = AdmitCall(*ctx, &id); !st.ok()) {
    c.refused = std::move(st);
    return c;
  }
  c.principal = std::move(id.principal);
  // Anonymous requests are counted by the daemon as a whole; per principal
  // only where there is one, or a quota to enforce.
  if (!id.anonymous() || id.quota.max_inflight > 0) {
    c.principal_inflight = PrincipalStats::Global().Inflight(c.principal);
    c.max_inflight = id.quota.max_inflight;
  }
  return c;
}

Status Authenticate(const grpc::ServerContextBase& ctx) {
  Identity id;
  return AdmitCall(ctx, &id);
}

KernelServiceImpl::KernelServiceImpl(const Config& cfg, RequestRunner& runner)
    : cfg_(cfg), runner_(runner) {
  RouteLibraryLogs();
}

namespace {

// An ExecuteStream refused before its first message (no identity).
class RefusedStream : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const Status& st) { Finish(ToGrpc(st)); }
  void OnDone() override { delete this; }
};

// One raw Execute call: the parsed request and its response live here until
// gRPC is done with the call.
class ExecuteCall final : public grpc::ServerUnaryReactor {
 public:
  void OnDone() override { delete this; }
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
};

}  // namespace

grpc::ServerUnaryReactor* KernelServiceImpl::Execute(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* in,
                                                     grpc::ByteBuffer* out) {
  auto* call = new ExecuteCall();     // deletes itself (OnDone)
  CallControl ctl = ControlFor(ctx);  // admitted before the message is parsed
  if (!ctl.refused.ok()) {
    call->Finish(ToGrpc(ctl.refused));
    return call;
  }
  if (Status st = ParseRawMessage(*in, &call->req); !st.ok()) {
    call->Finish(ToGrpc(st));
    return call;
  }
  runner_.Start(call->req, &call->resp, std::move(ctl), [call, out](const Status& st) {
    grpc::Status result = ToGrpc(st);
    if (result.ok()) result = SerializeRawMessage(call->resp, out);
    call->Finish(result);
  });
  return call;
}

namespace {

class ExecuteGraphCall final : public grpc::ServerUnaryReactor {
 public:
  void OnDone() override { delete this; }
  v1::ExecuteGraphRequest req;
  v1::ExecuteGraphResponse resp;
};

}  // namespace

grpc::ServerUnaryReactor* KernelServiceImpl::ExecuteGraph(grpc::CallbackServerContext* ctx,
                                                          const grpc::ByteBuffer* in,
                                                          grpc::ByteBuffer* out) {
  auto* call = new ExecuteGraphCall();  // deletes itself (OnDone)
  CallControl ctl = ControlFor(ctx);    // admitted before the message is parsed
  GraphRunner* graphs = CurrentGraphRunner();
  if (!ctl.refused.ok() || graphs == nullptr) {
    call->Finish(graphs == nullptr ? grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                                  "this server runs no graphs")
                                   : ToGrpc(ctl.refused));
    return call;
  }
  if (Status st = ParseRawMessage(*in, &call->req); !st.ok()) {
    call->Finish(ToGrpc(st));
    return call;
  }
  graphs->Start(call->req, &call->resp, std::move(ctl), [call, out](const Status& st) {
    grpc::Status result = ToGrpc(st);
    if (result.ok()) result = SerializeRawMessage(call->resp, out);
    call->Finish(result);
  });
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* KernelServiceImpl::ExecuteStream(
    grpc::CallbackServerContext* ctx) {
  // Checked once up front; each message is identified again (ControlFor),
  // so a token revoked by a reload stops the stream's later requests.
  if (Status st = Authenticate(*ctx); !st.ok()) return new RefusedStream(st);
  ExecuteStreamReactor::Limits limits;
  limits.window = cfg_.stream_window;
  limits.buffer_bytes = static_cast<int64_t>(cfg_.stream_buffer_mb) << 20;
  return new ExecuteStreamReactor(ctx, runner_, limits);
}

namespace {

grpc::Status DescribeKernels(const Config& cfg, const RequestRunner& runner, const Principal& who,
                             const v1::ListKernelsRequest& req, v1::ListKernelsResponse* resp) {
  bool found = false;
  // The built-ins, then the user kernels the caller sees (sandbox/user_kernels.h).
  std::vector<const OpDef*> ops = OpRegistry::Global().List();
  if (const auto* user = sandbox::UserKernels())
    for (const OpDef* op : user->Visible(who)) ops.push_back(op);
  for (const OpDef* op : ops) {
    if (!req.name().empty() && req.name() != op->name) continue;
    if (op->test_only() && !cfg.enable_test_ops) continue;
    found = true;
    v1::KernelInfo* k = resp->add_kernels();
    k->set_name(op->name);
    k->set_doc(op->doc);
    for (const auto& in : op->inputs) {
      v1::TensorSpec* t = k->add_inputs();
      t->set_name(in.name);
      in.dtypes.ForEach([&](DType d) { t->add_dtypes(ToProto(d)); });
      t->set_shape(in.shape.any ? "[...]" : in.shape.text);
      t->set_doc(in.doc);
      // How a client makes a valid random value of it (kernelctl run).
      if (in.gen != InputGen::kUniform || !in.gen_shape.empty()) {
        v1::InputGeneration* g = t->mutable_generation();
        g->set_kind(static_cast<v1::InputGeneration::Kind>(static_cast<int>(in.gen)));
        g->set_upper(in.gen_upper);
        g->set_shape(in.gen_shape);
      }
    }
    for (const auto& out : op->outputs) {
      v1::TensorSpec* t = k->add_outputs();
      t->set_name(out.name);
      t->set_shape(out.rule.description);
      t->set_doc(out.doc);
      t->set_in_place_of(out.in_place_of);
      t->set_may_alias(out.may_alias);
    }
    for (const auto& a : op->attrs) {
      v1::AttrSpec* s = k->add_attrs();
      s->set_name(a.name);
      s->set_type(std::string(AttrTypeName(a.type)));
      s->set_required(!a.default_value.has_value());
      if (a.default_value) ToProto(*a.default_value, s->mutable_default_value());
      s->set_doc(a.doc);
    }
    for (const auto& impl : op->impls) {
      v1::ImplementationInfo* i = k->add_implementations();
      i->set_backend(impl.backend);
      i->set_requirements(impl.requires_.Describe());
      i->set_priority(impl.priority);
      i->set_priority_note(impl.priority_doc);
      for (const auto& [dev, why] : runner.scheduler().DeviceEligibility(impl)) {
        v1::DeviceEligibility* e = i->add_devices();
        e->set_device(dev.device.ToString());
        e->set_eligible(!why.has_value());
        if (why) e->set_reason(*why);
      }
    }
    AddTuningBuckets(runner.scheduler().tuning(), op->name, k);
  }
  if (!req.name().empty() && !found)
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown op '" + req.name() + "'");
  return grpc::Status::OK;
}

}  // namespace

grpc::Status AnswerListKernels(const grpc::ServerContextBase& ctx, const Config& cfg,
                               const RequestRunner& runner, const grpc::ByteBuffer& in,
                               grpc::ByteBuffer* out) {
  Identity who;  // ListKernels shows the user kernels the caller sees
  if (Status st = AdmitCall(ctx, &who); !st.ok()) return ToGrpc(st);
  v1::ListKernelsRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  v1::ListKernelsResponse resp;
  if (grpc::Status st = DescribeKernels(cfg, runner, who.principal, req, &resp); !st.ok()) return st;
  return SerializeRawMessage(resp, out);
}

grpc::ServerUnaryReactor* KernelServiceImpl::ListKernels(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* req,
                                                         grpc::ByteBuffer* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(AnswerListKernels(*ctx, cfg_, runner_, *req, resp));
  return reactor;
}

namespace {

void DescribeServer(const Config& cfg, const RequestRunner& runner,
                    v1::GetServerInfoResponse* resp) {
  resp->set_version(kKerneldVersion);
  if (!cfg.lane_socket.empty()) resp->set_lane_socket("unix:" + cfg.lane_socket);
  resp->set_git_revision(kKerneldGitRevision);
  const auto& cuda = runner.devices().cuda();
  resp->set_cuda_runtime_version(cuda.runtime);
  resp->set_cuda_driver_version(cuda.driver);
  resp->set_cuda_status(cuda.status);
  for (const DeviceInfo& d : runner.devices().Devices()) {
    v1::DeviceInfo* o = resp->add_devices();
    o->set_kind(std::string(DeviceKindName(d.device.kind)));
    o->set_index(d.device.index);
    o->set_id(d.device.ToString());
    o->set_uuid(d.uuid);
    o->set_name(d.name);
    o->set_compute_capability_major(d.compute_capability / 10);
    o->set_compute_capability_minor(d.compute_capability % 10);
    o->set_total_memory_bytes(d.total_memory);
    o->set_sm_count(d.sm_count);
    o->set_l2_cache_bytes(d.l2_bytes);
    o->set_healthy(d.healthy);
  }
  for (const auto& b : runner.scheduler().AvailableBackends()) resp->add_backends(b);
}

}  // namespace

grpc::Status AnswerServerInfo(const grpc::ServerContextBase& ctx, const Config& cfg,
                              const RequestRunner& runner, const grpc::ByteBuffer& in,
                              grpc::ByteBuffer* out) {
  Identity id;
  if (Status st = AdmitCall(ctx, &id); !st.ok()) return ToGrpc(st);
  v1::GetServerInfoRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  v1::GetServerInfoResponse resp;
  DescribeServer(cfg, runner, &resp);
  resp.set_principal(id.principal);
  resp.set_principal_is_connection(IsConnectionPrincipal(id.principal));
  return SerializeRawMessage(resp, out);
}

grpc::ServerUnaryReactor* KernelServiceImpl::GetServerInfo(grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* req,
                                                           grpc::ByteBuffer* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(AnswerServerInfo(*ctx, cfg_, runner_, *req, resp));
  return reactor;
}

}  // namespace kerneld::server
