// kerneld.v1.KernelService on gRPC's callback (reactor) API: handlers hand
// work to device workers and return at once; no gRPC thread ever waits for
// a kernel.
#pragma once

#include <grpcpp/grpcpp.h>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/request_runner.h"

namespace kerneld::server {

// ExecuteStream is served raw (ByteBuffers) so a malformed message can be
// told apart from a half-close; see execute_stream.h.
using KernelServiceBase = v1::KernelService::WithCallbackMethod_Execute<
    v1::KernelService::WithRawCallbackMethod_ExecuteStream<
        v1::KernelService::WithCallbackMethod_ListKernels<
            v1::KernelService::WithCallbackMethod_GetServerInfo<v1::KernelService::Service>>>>;

class KernelServiceImpl final : public KernelServiceBase {
 public:
  KernelServiceImpl(const Config& cfg, RequestRunner& runner) : cfg_(cfg), runner_(runner) {}

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx, const v1::ExecuteRequest* req,
                                    v1::ExecuteResponse* resp) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExecuteStream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ListKernels(grpc::CallbackServerContext* ctx,
                                        const v1::ListKernelsRequest* req,
                                        v1::ListKernelsResponse* resp) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* ctx,
                                          const v1::GetServerInfoRequest* req,
                                          v1::GetServerInfoResponse* resp) override;

 private:
  const Config& cfg_;
  RequestRunner& runner_;
};

grpc::Status ToGrpc(const Status& st);
// The call's deadline, cancellation and identity (auth/authenticator.h).
CallControl ControlFor(grpc::ServerContextBase* ctx);
// The caller's identity alone: OK, or why it is refused.
Status Authenticate(const grpc::ServerContextBase& ctx);
// ListKernels and GetServerInfo for the caller of ctx: identified, then
// answered. Shared by KernelServiceImpl (callback API) and the sync service
// (sync_service.h), which return the status their own way.
grpc::Status AnswerListKernels(const grpc::ServerContextBase& ctx, const Config& cfg,
                               const RequestRunner& runner, const v1::ListKernelsRequest& req,
                               v1::ListKernelsResponse* resp);
grpc::Status AnswerServerInfo(const grpc::ServerContextBase& ctx, const RequestRunner& runner,
                              v1::GetServerInfoResponse* resp);

}  // namespace kerneld::server
