#include "kserve/kserve_service.h"

#include "auth/authenticator.h"
#include "kserve/kserve_stream.h"
#include "service/execute_stream.h"
#include "service/kernel_service.h"
#include "service/sync_service.h"

namespace kerneld::server::kserve {

namespace {

// A ModelStreamInfer refused before its first message (no identity).
class RefusedStream : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const Status& st) { Finish(ToGrpc(st)); }
  void OnDone() override { delete this; }
};

// One raw ModelInfer: its messages live here until gRPC is done with the call.
class InferCall final : public grpc::ServerUnaryReactor {
 public:
  void OnDone() override { delete this; }
  InferExchange x;
};

ExecuteStreamReactor::Limits StreamLimits(const Config& cfg) {
  ExecuteStreamReactor::Limits limits;
  limits.window = cfg.stream_window;
  limits.buffer_bytes = static_cast<int64_t>(cfg.stream_buffer_mb) << 20;
  return limits;
}

}  // namespace

#define KERNELD_KSERVE_CALLBACK(Method, client_memory)                                         \
  grpc::ServerUnaryReactor* KServeServiceImpl::Method(                                         \
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) { \
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();                                       \
    r->Finish(h_.Serve(*ctx, client_memory, &KServeHandlers::Method, *req, resp));             \
    return r;                                                                                  \
  }
KERNELD_KSERVE_UNARY_METHODS(KERNELD_KSERVE_CALLBACK)
#undef KERNELD_KSERVE_CALLBACK

grpc::ServerUnaryReactor* KServeServiceImpl::ModelInfer(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* in,
                                                        grpc::ByteBuffer* out) {
  auto* call = new InferCall();       // deletes itself (OnDone)
  CallControl ctl = ControlFor(ctx);  // admitted before the message is parsed
  if (!ctl.refused.ok()) {
    call->Finish(ToGrpc(ctl.refused));
    return call;
  }
  if (Status st = h_.ParseInfer(ctl.principal, *in, &call->x); !st.ok()) {
    call->Finish(ToGrpc(st));
    return call;
  }
  h_.runner().Start(call->x.exec, &call->x.result, std::move(ctl),
                    [call, out](const Status& st) { call->Finish(call->x.Answer(st, out)); });
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* KServeServiceImpl::ModelStreamInfer(
    grpc::CallbackServerContext* ctx) {
  // Admitted once up front (its principal's regions are the stream's);
  // each message is admitted again, as on ExecuteStream.
  Identity id;
  if (Status st = AdmitCall(*ctx, &id); !st.ok()) return new RefusedStream(st);
  return new ExecuteStreamReactor(ctx, h_.runner(), StreamLimits(h_.config()),
                                  std::make_unique<KServeStreamCodec>(h_, id.principal));
}

KServeServiceSyncImpl::KServeServiceSyncImpl(KServeHandlers& h) : h_(h) {
  const std::string svc = Inference::service_full_name();
#define KERNELD_KSERVE_SYNC(Method, client_memory)                                               \
  AddUnary(svc, #Method,                                                                         \
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) { \
             return h_.Serve(*ctx, client_memory, &KServeHandlers::Method, in, out);             \
           });
  KERNELD_KSERVE_UNARY_METHODS(KERNELD_KSERVE_SYNC)
#undef KERNELD_KSERVE_SYNC
  AddUnary(svc, "ModelInfer",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             CallControl ctl = ControlFor(ctx);
             if (!ctl.refused.ok()) return ToGrpc(ctl.refused);
             InferExchange x;
             if (Status st = h_.ParseInfer(ctl.principal, in, &x); !st.ok()) return ToGrpc(st);
             const Status run = RunAndWait(h_.runner(), std::move(ctl), x.exec, &x.result);
             return x.Answer(run, out);
           });
  AddBidi(svc, "ModelStreamInfer",
          [this](grpc::ServerContext* ctx,
                 grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            Identity id;
            if (Status st = AdmitCall(*ctx, &id); !st.ok()) return ToGrpc(st);
            KServeStreamCodec codec(h_, id.principal);
            return ServeSyncStream(ctx, stream, h_.runner(), codec);
          });
}

}  // namespace kerneld::server::kserve
