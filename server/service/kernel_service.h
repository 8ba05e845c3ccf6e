// kerneld.v1.KernelService on gRPC's callback (reactor) API: handlers hand
// work to device workers and return at once; no gRPC thread ever waits for
// a kernel.
#pragma once

#include <grpcpp/grpcpp.h>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/request_runner.h"

namespace kerneld::server {

class KernelServiceImpl final : public v1::KernelService::CallbackService {
 public:
  KernelServiceImpl(const Config& cfg, RequestRunner& runner) : cfg_(cfg), runner_(runner) {}

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx, const v1::ExecuteRequest* req,
                                    v1::ExecuteResponse* resp) override;
  grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* ExecuteStream(
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
CallControl ControlFor(grpc::CallbackServerContext* ctx);

}  // namespace kerneld::server
