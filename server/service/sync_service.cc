#include "service/sync_service.h"

#include <grpcpp/impl/codegen/method_handler.h>

#include <string>

#include "absl/synchronization/notification.h"
#include "service/execute_stream.h"
#include "service/kernel_service.h"

namespace kerneld::server {

namespace {

// The method index of ExecuteStream in kerneld.v1.KernelService (the order
// of its rpcs in kerneld.proto).
constexpr int kExecuteStreamMethod = 1;

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
  // The generated sync handler parses each message itself and reports a bad
  // one like a half-close; this one hands over the raw bytes.
  MarkMethodStreamed(kExecuteStreamMethod,
                     new grpc::internal::BidiStreamingHandler<KernelServiceSyncImpl,
                                                              grpc::ByteBuffer, grpc::ByteBuffer>(
                         [](KernelServiceSyncImpl* self, grpc::ServerContext* ctx,
                            grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
                           return self->ExecuteStreamRaw(ctx, stream);
                         },
                         this));
}

Status KernelServiceSyncImpl::RunAndWait(grpc::ServerContext* ctx, const v1::ExecuteRequest& req,
                                         v1::ExecuteResponse* resp) {
  CallControl ctl = ControlFor(ctx);
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

grpc::Status KernelServiceSyncImpl::Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                                            v1::ExecuteResponse* resp) {
  return ToGrpc(RunAndWait(ctx, *req, resp));
}

grpc::Status KernelServiceSyncImpl::ExecuteStreamRaw(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  // Checked once up front, as the callback stream does; each message is
  // identified again (ControlFor), so a revoked token stops later requests.
  if (Status st = Authenticate(*ctx); !st.ok()) return ToGrpc(st);
  grpc::ByteBuffer in, out;
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
  for (int64_t n = 1; stream->Read(&in); ++n) {
    const size_t bytes = in.Length();
    req.Clear();
    if (!grpc::SerializationTraits<v1::ExecuteRequest>::Deserialize(&in, &req).ok())
      return MalformedStreamMessage(n, bytes);
    ResetForNextMessage(&resp);
    // A failed request reports in its response's status (the runner sets
    // it) and the stream goes on.
    (void)RunAndWait(ctx, req, &resp);
    SerializeStreamResponse(resp, &out);
    if (!stream->Write(out)) break;  // the client went away
  }
  return grpc::Status::OK;
}

grpc::Status KernelServiceSyncImpl::ListKernels(grpc::ServerContext* ctx,
                                                const v1::ListKernelsRequest* req,
                                                v1::ListKernelsResponse* resp) {
  return AnswerListKernels(*ctx, cfg_, runner_, *req, resp);
}

grpc::Status KernelServiceSyncImpl::GetServerInfo(grpc::ServerContext* ctx,
                                                  const v1::GetServerInfoRequest*,
                                                  v1::GetServerInfoResponse* resp) {
  return AnswerServerInfo(*ctx, runner_, resp);
}

}  // namespace kerneld::server
