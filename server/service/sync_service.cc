#include "service/sync_service.h"

#include <string>

#include "absl/synchronization/notification.h"
#include "service/execute_stream.h"
#include "service/kernel_service.h"
#include "service/library_log.h"

namespace kerneld::server {

namespace {

// Ready for the stream's next message, keeping the info and status
// submessages and their strings' storage: Clear() deletes them, and every
// response sets both again (four allocations a message otherwise). Their
// fields are cleared, so nothing of the last answer is left. (A request the
// runner fails before it stamps the info, an exception in RequestRunner::Start,
// now answers with an empty info rather than none: all zeros either way.)
void ResetForNextMessage(v1::ExecuteResponse* resp) {
  resp->clear_request_id();
  resp->clear_outputs();
  if (resp->has_info()) resp->mutable_info()->Clear();
  if (resp->has_status()) resp->mutable_status()->Clear();
}

}  // namespace

std::function<bool()> CancelCheckAfter(std::chrono::nanoseconds wait, std::function<bool()> check) {
  return [wait, check = std::move(check), since = std::chrono::steady_clock::now()] {
    return std::chrono::steady_clock::now() - since >= wait && check();
  };
}

KernelServiceSyncImpl::KernelServiceSyncImpl(const Config& cfg, RequestRunner& runner)
    : cfg_(cfg), runner_(runner) {
  RouteLibraryLogs();
  const std::string svc = v1::KernelService::service_full_name();
  AddUnary(svc, "Execute",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return Execute(ctx, in, out);
           });
  AddBidi(svc, "ExecuteStream",
          [this](grpc::ServerContext* ctx,
                 grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return ExecuteStreamRaw(ctx, stream);
          });
  AddUnary(svc, "ListKernels",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return AnswerListKernels(*ctx, cfg_, runner_, in, out);
           });
  AddUnary(svc, "GetServerInfo",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return AnswerServerInfo(*ctx, runner_, in, out);
           });
}

Status KernelServiceSyncImpl::RunAndWait(CallControl ctl, const v1::ExecuteRequest& req,
                                         v1::ExecuteResponse* resp) {
  // On the sync API IsCancelled() polls the call's completion queue (30 us
  // a request on the 2-core machine, measured as the "launch" stage); only
  // a request that waited in a queue is worth asking about.
  ctl.cancelled = CancelCheckAfter(kSyncCancelCheckAfter, std::move(ctl.cancelled));
  Status result;
  absl::Notification done;
  runner_.Start(req, resp, std::move(ctl), [&](const Status& st) {
    result = st;
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

grpc::Status KernelServiceSyncImpl::Execute(grpc::ServerContext* ctx, const grpc::ByteBuffer& in,
                                            grpc::ByteBuffer* out) {
  CallControl ctl = ControlFor(ctx);  // admitted before the message is parsed
  if (!ctl.refused.ok()) return ToGrpc(ctl.refused);
  v1::ExecuteRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  v1::ExecuteResponse resp;
  if (Status st = RunAndWait(std::move(ctl), req, &resp); !st.ok()) return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

grpc::Status KernelServiceSyncImpl::ExecuteStreamRaw(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  // Checked once up front, as the callback stream does; each message is
  // admitted again (ControlFor), so a revoked token stops later requests.
  if (Status st = Authenticate(*ctx); !st.ok()) return ToGrpc(st);
  grpc::ByteBuffer in, out;
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
  for (int64_t n = 1; stream->Read(&in); ++n) {
    const size_t bytes = in.Length();
    CallControl ctl = ControlFor(ctx);
    req.Clear();
    // A refused message is not parsed; it answers in its response's status
    // (the runner sets it, as for a failed request) and the stream goes on.
    if (ctl.refused.ok() &&
        !grpc::SerializationTraits<v1::ExecuteRequest>::Deserialize(&in, &req).ok())
      return MalformedStreamMessage(n, bytes);
    ResetForNextMessage(&resp);
    (void)RunAndWait(std::move(ctl), req, &resp);
    SerializeStreamResponse(resp, &out);
    if (!stream->Write(out)) break;  // the client went away
  }
  return grpc::Status::OK;
}

}  // namespace kerneld::server
