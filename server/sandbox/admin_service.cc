#include "sandbox/admin_service.h"

#include "auth/authenticator.h"
#include "sandbox/evaluate.h"
#include "sandbox/sandbox_stats.h"
#include "service/kernel_service.h"

namespace kerneld::server::sandbox {

namespace {

// Admitted, then parsed: what every method does first.
template <typename Req>
Status Begin(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in, Identity* who,
             Req* req) {
  KERNELD_RETURN_IF_ERROR(AdmitCall(ctx, who));
  return ParseRawMessage(in, req);
}

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, const grpc::Status& st) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(st);
  return reactor;
}

}  // namespace

grpc::Status AdminHandlers::Register(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                                     grpc::ByteBuffer* out) {
  Identity who;
  v1::RegisterKernelRequest req;
  if (Status st = Begin(ctx, in, &who, &req); !st.ok()) return ToGrpc(st);
  v1::RegisterKernelResponse resp;
  if (Status st = registry.Register(who, req, &resp); !st.ok()) return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

grpc::Status AdminHandlers::Unregister(const grpc::ServerContextBase& ctx,
                                       const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
  Identity who;
  v1::UnregisterKernelRequest req;
  if (Status st = Begin(ctx, in, &who, &req); !st.ok()) return ToGrpc(st);
  if (Status st = registry.Unregister(who, req.name()); !st.ok()) return ToGrpc(st);
  return SerializeRawMessage(v1::UnregisterKernelResponse(), out);
}

grpc::Status AdminHandlers::List(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                                 grpc::ByteBuffer* out) {
  Identity who;
  v1::ListUserKernelsRequest req;
  if (Status st = Begin(ctx, in, &who, &req); !st.ok()) return ToGrpc(st);
  v1::ListUserKernelsResponse resp;
  if (Status st = registry.List(who, req.all_principals(), &resp); !st.ok()) return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

grpc::Status AdminHandlers::Evaluate(const grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                                     grpc::ByteBuffer* out) {
  Identity who;
  v1::EvaluateKernelRequest req;
  v1::EvaluateKernelResponse resp;
  Status st = Begin(ctx, in, &who, &req);
  if (st.ok()) st = EvaluateKernel(registry, launcher, has_gpu, who, req, &resp);
  SandboxStats::Global().CountEvaluation(st.code());  // refused ones too
  if (!st.ok()) return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

grpc::ServerUnaryReactor* AdminServiceImpl::RegisterKernel(grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* req,
                                                           grpc::ByteBuffer* resp) {
  return Finish(ctx, h_.Register(*ctx, *req, resp));
}
grpc::ServerUnaryReactor* AdminServiceImpl::UnregisterKernel(grpc::CallbackServerContext* ctx,
                                                             const grpc::ByteBuffer* req,
                                                             grpc::ByteBuffer* resp) {
  return Finish(ctx, h_.Unregister(*ctx, *req, resp));
}
grpc::ServerUnaryReactor* AdminServiceImpl::ListUserKernels(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* req,
                                                            grpc::ByteBuffer* resp) {
  return Finish(ctx, h_.List(*ctx, *req, resp));
}
grpc::ServerUnaryReactor* AdminServiceImpl::EvaluateKernel(grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* req,
                                                           grpc::ByteBuffer* resp) {
  return Finish(ctx, h_.Evaluate(*ctx, *req, resp));
}

AdminServiceSyncImpl::AdminServiceSyncImpl(AdminHandlers h) : h_(h) {
  const std::string svc = "kerneld.v1.AdminService";
  using Fn = grpc::Status (AdminHandlers::*)(const grpc::ServerContextBase&,
                                             const grpc::ByteBuffer&, grpc::ByteBuffer*);
  const std::pair<const char*, Fn> methods[] = {{"RegisterKernel", &AdminHandlers::Register},
                                                {"UnregisterKernel", &AdminHandlers::Unregister},
                                                {"ListUserKernels", &AdminHandlers::List},
                                                {"EvaluateKernel", &AdminHandlers::Evaluate}};
  for (const auto& m : methods) {
    const Fn fn = m.second;  // a copy: clang 14 cannot capture a structured binding
    AddUnary(svc, m.first,
             [this, fn](grpc::ServerContext* ctx, const grpc::ByteBuffer& in,
                        grpc::ByteBuffer* out) { return (h_.*fn)(*ctx, in, out); });
  }
}

}  // namespace kerneld::server::sandbox
