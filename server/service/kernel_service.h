// kerneld.v1.KernelService on gRPC's callback (reactor) API: handlers hand
// work to device workers and return at once; no gRPC thread ever waits for
// a kernel.
#pragma once

#include <grpcpp/grpcpp.h>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/request_runner.h"

namespace kerneld::server {

// Every method is served raw (ByteBuffers): the caller is admitted
// (identified, rate limited) before its message is parsed, and a message
// that does not parse is INVALID_ARGUMENT (service/raw_unary.h);
// ExecuteStream also tells a malformed message from a half-close
// (execute_stream.h).
using KernelServiceBase = v1::KernelService::WithRawCallbackMethod_Execute<
    v1::KernelService::WithRawCallbackMethod_ExecuteStream<
        v1::KernelService::WithRawCallbackMethod_ListKernels<
            v1::KernelService::WithRawCallbackMethod_GetServerInfo<
                v1::KernelService::WithRawCallbackMethod_ExecuteGraph<
                    v1::KernelService::Service>>>>>;

class KernelServiceImpl final : public KernelServiceBase {
 public:
  KernelServiceImpl(const Config& cfg, RequestRunner& runner);

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                    grpc::ByteBuffer* resp) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExecuteStream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ListKernels(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  // graph/graph_runner.h
  grpc::ServerUnaryReactor* ExecuteGraph(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* req,
                                         grpc::ByteBuffer* resp) override;

 private:
  const Config& cfg_;
  RequestRunner& runner_;
};

grpc::Status ToGrpc(const Status& st);
// The call's deadline, cancellation and identity (auth/authenticator.h);
// the caller is admitted (identified and rate limited) here, once a request.
CallControl ControlFor(grpc::ServerContextBase* ctx);
// The caller's admission alone (Authenticator::Admit): OK, or why it is refused.
Status Authenticate(const grpc::ServerContextBase& ctx);
// ListKernels and GetServerInfo, raw, for the caller of ctx: admitted, then
// parsed, then answered. Shared by KernelServiceImpl (callback API) and the
// sync service (sync_service.h), which return the status their own way.
grpc::Status AnswerListKernels(const grpc::ServerContextBase& ctx, const Config& cfg,
                               const RequestRunner& runner, const grpc::ByteBuffer& req,
                               grpc::ByteBuffer* resp);
grpc::Status AnswerServerInfo(const grpc::ServerContextBase& ctx, const Config& cfg,
                              const RequestRunner& runner, const grpc::ByteBuffer& req,
                              grpc::ByteBuffer* resp);

}  // namespace kerneld::server
