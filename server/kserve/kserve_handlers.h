// inference.GRPCInferenceService's logic, shared by the callback service
// and the sync one (kserve_service.h), as BufferHandlers is for
// BufferService. Every unary method but ModelInfer is answered here, for a
// caller admitted before its message was parsed (Serve); ModelInfer and
// ModelStreamInfer decode here (DecodeInfer) and run through the same
// RequestRunner as kerneld.v1's Execute.
#pragma once

#include <grpcpp/grpcpp.h>

#include "auth/identity.h"
#include "config.h"
#include "inference/grpc_service.grpc.pb.h"
#include "kserve/infer_codec.h"
#include "kserve/shm_regions.h"
#include "metrics/metrics.h"
#include "service/buffer_service.h"
#include "service/raw_unary.h"
#include "service/request_runner.h"

namespace kerneld::server::kserve {

// The service's unary methods but ModelInfer, each with whether it
// registers client memory (BufferHandlers::Caller: an identity beyond
// loopback, or --allow_client_buffers). Both services expand this list.
#define KERNELD_KSERVE_UNARY_METHODS(X)  \
  X(ServerLive, false)                   \
  X(ServerReady, false)                  \
  X(ModelReady, false)                   \
  X(ServerMetadata, false)               \
  X(ModelMetadata, false)                \
  X(ModelConfig, false)                  \
  X(ModelStatistics, false)              \
  X(RepositoryIndex, false)              \
  X(RepositoryModelLoad, false)          \
  X(RepositoryModelUnload, false)        \
  X(SystemSharedMemoryStatus, false)     \
  X(SystemSharedMemoryRegister, true)    \
  X(SystemSharedMemoryUnregister, false) \
  X(CudaSharedMemoryStatus, false)       \
  X(CudaSharedMemoryRegister, true)      \
  X(CudaSharedMemoryUnregister, false)   \
  X(TraceSetting, false)                 \
  X(LogSettings, false)

// One ModelInfer's messages, from the request's bytes to the answer's:
// the KServe request, the kerneld.v1 request it becomes and its result,
// and the KServe answer. Held until the runner is done with them.
struct InferExchange {
  inference::ModelInferRequest req;
  v1::ExecuteRequest exec;
  v1::ExecuteResponse result;
  InferState state;
  inference::ModelInferResponse resp;
  // The runner's final status and result as the answer's bytes in *out.
  grpc::Status Answer(const Status& run, grpc::ByteBuffer* out);
};

class KServeHandlers {
 public:
  KServeHandlers(const Config& cfg, RequestRunner& runner, Metrics& metrics,
                 BufferHandlers& buffers, BufferRegistry& registry);

#define KERNELD_KSERVE_DECLARE(Method, client_memory)                      \
  Status Method(const Identity& id, const inference::Method##Request& req, \
                inference::Method##Response* resp);
  KERNELD_KSERVE_UNARY_METHODS(KERNELD_KSERVE_DECLARE)
#undef KERNELD_KSERVE_DECLARE

  // One unary call, raw: the caller admitted (and allowed client memory or
  // not), then its message parsed, then answered.
  template <class Req, class Resp>
  grpc::Status Serve(const grpc::ServerContextBase& ctx, bool client_memory,
                     Status (KServeHandlers::*handle)(const Identity&, const Req&, Resp*),
                     const grpc::ByteBuffer& in, grpc::ByteBuffer* out);

  // A ModelInferRequest of the admitted `who` into the kerneld.v1 request
  // the runner takes (infer_codec.h), its shared-memory regions looked up
  // among who's.
  Status DecodeInfer(const Principal& who, inference::ModelInferRequest* req,
                     v1::ExecuteRequest* out, InferState* state) const;
  // in parsed into x->req and decoded: OK, or the status to answer with.
  Status ParseInfer(const Principal& who, const grpc::ByteBuffer& in, InferExchange* x) const;

  RequestRunner& runner() { return runner_; }
  const Config& config() const { return cfg_; }

 private:
  const Config& cfg_;
  RequestRunner& runner_;
  Metrics& metrics_;
  BufferHandlers& buffers_;
  ShmRegions regions_;
};

template <class Req, class Resp>
grpc::Status KServeHandlers::Serve(const grpc::ServerContextBase& ctx, bool client_memory,
                                   Status (KServeHandlers::*handle)(const Identity&, const Req&,
                                                                    Resp*),
                                   const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
  Identity id;
  if (Status st = buffers_.Caller(ctx, client_memory, &id); !st.ok())
    return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
  Req req;
  if (Status st = ParseRawMessage(in, &req); !st.ok())
    return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
  Resp resp;
  if (Status st = (this->*handle)(id, req, &resp); !st.ok())
    return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
  return SerializeRawMessage(resp, out);
}

}  // namespace kerneld::server::kserve
