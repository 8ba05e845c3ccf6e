// kerneld.v1.JitService (docs/jit.md): WarmJit compiles the kernel a
// request would run on the nvrtc backend ahead of its first use, ListJitCache
// shows the cache. Served raw like the other services (raw_unary.h: the
// caller is admitted before its message is parsed), on the callback API or,
// with --grpc_api=sync, the sync one. WarmJit compiles on the thread that
// serves it (a warm-up is an operator's call, about a second a kernel).
#pragma once

#include <grpcpp/grpcpp.h>

#include "jit/jit_backend.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/raw_unary.h"

namespace kerneld::server {

grpc::Status AnswerWarmJit(const grpc::ServerContextBase& ctx, jit::JitBackend& jit,
                           const grpc::ByteBuffer& req, grpc::ByteBuffer* resp);
grpc::Status AnswerListJitCache(const grpc::ServerContextBase& ctx, const jit::JitBackend& jit,
                                const grpc::ByteBuffer& req, grpc::ByteBuffer* resp);

using JitServiceBase = v1::JitService::WithRawCallbackMethod_WarmJit<
    v1::JitService::WithRawCallbackMethod_ListJitCache<v1::JitService::Service>>;

class JitServiceImpl final : public JitServiceBase {
 public:
  explicit JitServiceImpl(jit::JitBackend& jit) : jit_(jit) {}
  grpc::ServerUnaryReactor* WarmJit(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                    grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListJitCache(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* req,
                                         grpc::ByteBuffer* resp) override;

 private:
  jit::JitBackend& jit_;
};

class JitServiceSyncImpl final : public RawSyncService {
 public:
  explicit JitServiceSyncImpl(jit::JitBackend& jit);

 private:
  jit::JitBackend& jit_;
};

}  // namespace kerneld::server
