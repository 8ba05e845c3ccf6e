// inference.GRPCInferenceService (KServe v2) on the daemon's own port,
// beside kerneld.v1: on gRPC's callback API (the default) and on its sync
// API (--grpc_api=sync), as the kerneld.v1 services are. Every method is
// served raw (service/raw_unary.h): the caller is admitted (identified by
// the same TLS certificates, tokens and unix-socket uids, rate limited)
// before its message is parsed, and a message that does not parse is
// INVALID_ARGUMENT. ModelInfer runs through kerneld.v1 Execute's
// RequestRunner, ModelStreamInfer through ExecuteStream's stream machinery
// (kserve_stream.h). docs/kserve.md has the mapping.
#pragma once

#include <grpcpp/grpcpp.h>

#include "inference/grpc_service.grpc.pb.h"
#include "kserve/kserve_handlers.h"
#include "service/raw_unary.h"

namespace kerneld::server::kserve {

using Inference = inference::GRPCInferenceService;

// Base wrapped in each of Ms (gRPC's generated WithRawCallbackMethod_X).
template <class Base, template <class> class... Ms>
struct Wrapped {
  using type = Base;
};
template <class Base, template <class> class M, template <class> class... Ms>
struct Wrapped<Base, M, Ms...> {
  using type = M<typename Wrapped<Base, Ms...>::type>;
};

// All twenty methods raw: one left typed would be a sync method, and one
// sync method in a callback server runs gRPC's sync pollers beside it.
using KServeServiceBase = Wrapped<
    Inference::Service, Inference::WithRawCallbackMethod_ServerLive,
    Inference::WithRawCallbackMethod_ServerReady, Inference::WithRawCallbackMethod_ModelReady,
    Inference::WithRawCallbackMethod_ServerMetadata, Inference::WithRawCallbackMethod_ModelMetadata,
    Inference::WithRawCallbackMethod_ModelInfer, Inference::WithRawCallbackMethod_ModelStreamInfer,
    Inference::WithRawCallbackMethod_ModelConfig, Inference::WithRawCallbackMethod_ModelStatistics,
    Inference::WithRawCallbackMethod_RepositoryIndex,
    Inference::WithRawCallbackMethod_RepositoryModelLoad,
    Inference::WithRawCallbackMethod_RepositoryModelUnload,
    Inference::WithRawCallbackMethod_SystemSharedMemoryStatus,
    Inference::WithRawCallbackMethod_SystemSharedMemoryRegister,
    Inference::WithRawCallbackMethod_SystemSharedMemoryUnregister,
    Inference::WithRawCallbackMethod_CudaSharedMemoryStatus,
    Inference::WithRawCallbackMethod_CudaSharedMemoryRegister,
    Inference::WithRawCallbackMethod_CudaSharedMemoryUnregister,
    Inference::WithRawCallbackMethod_TraceSetting,
    Inference::WithRawCallbackMethod_LogSettings>::type;

// The service on gRPC's callback API.
class KServeServiceImpl final : public KServeServiceBase {
 public:
  explicit KServeServiceImpl(KServeHandlers& h) : h_(h) {}

#define KERNELD_KSERVE_CALLBACK(Method, client_memory)                                            \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req, \
                                   grpc::ByteBuffer* resp) override;
  KERNELD_KSERVE_UNARY_METHODS(KERNELD_KSERVE_CALLBACK)
#undef KERNELD_KSERVE_CALLBACK
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override;

 private:
  KServeHandlers& h_;
};

// The same service on gRPC's sync API (--grpc_api=sync).
class KServeServiceSyncImpl final : public RawSyncService {
 public:
  explicit KServeServiceSyncImpl(KServeHandlers& h);

 private:
  KServeHandlers& h_;
};

}  // namespace kerneld::server::kserve
