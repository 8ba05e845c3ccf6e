// kerneld.v1.AdminService (docs/user-kernels.md): RegisterKernel,
// UnregisterKernel, ListUserKernels, EvaluateKernel. Served raw like the
// other services (service/raw_unary.h: the caller is admitted before its
// message is parsed), on the callback API or, with --grpc_api=sync, the
// sync one. RegisterKernel compiles on the thread that serves it (an
// operator's call, rate limited per principal).
#pragma once

#include <grpcpp/grpcpp.h>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "sandbox/user_kernels.h"
#include "service/raw_unary.h"

namespace kerneld::server::sandbox {

// The four methods, raw; shared by both APIs.
struct AdminHandlers {
  UserKernelRegistry& registry;
  bool has_gpu = false;
  UserKernelLauncher* launcher = nullptr;  // EvaluateKernel's GPU side; null: none
  grpc::Status Register(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                        grpc::ByteBuffer* out);
  grpc::Status Unregister(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                          grpc::ByteBuffer* out);
  grpc::Status List(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                    grpc::ByteBuffer* out);
  grpc::Status Evaluate(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                        grpc::ByteBuffer* out);
};

using AdminServiceBase = v1::AdminService::WithRawCallbackMethod_RegisterKernel<
    v1::AdminService::WithRawCallbackMethod_UnregisterKernel<
        v1::AdminService::WithRawCallbackMethod_ListUserKernels<
            v1::AdminService::WithRawCallbackMethod_EvaluateKernel<v1::AdminService::Service>>>>;

class AdminServiceImpl final : public AdminServiceBase {
 public:
  explicit AdminServiceImpl(AdminHandlers h) : h_(h) {}
  grpc::ServerUnaryReactor* RegisterKernel(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* req,
                                           grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* UnregisterKernel(grpc::CallbackServerContext* ctx,
                                             const grpc::ByteBuffer* req,
                                             grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListUserKernels(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* req,
                                            grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* EvaluateKernel(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* req,
                                           grpc::ByteBuffer* resp) override;

 private:
  AdminHandlers h_;
};

class AdminServiceSyncImpl final : public RawSyncService {
 public:
  explicit AdminServiceSyncImpl(AdminHandlers h);

 private:
  AdminHandlers h_;
};

}  // namespace kerneld::server::sandbox
