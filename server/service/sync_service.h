// kerneld.v1.KernelService with Execute and ExecuteStream on gRPC's sync
// API (--grpc_api=sync): the handler runs on the gRPC thread that polled
// the call and waits there for its request, with no hop to the callback
// API's executor threads. Measured on the H100 host, the echo floor's one
// client p50 was 1.2-1.9x lower on the sync API than on the callback API over
// the same transport (docs/performance.md), and that hop is on every call.
// The price: every open ExecuteStream holds a gRPC thread for its life (and
// a writer thread once a request of it runs beyond its read); its requests
// run concurrently within --stream_window (service/sync_stream.h). Every
// other method is on the sync API too.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/raw_unary.h"
#include "service/request_runner.h"
#include "service/stream_codec.h"

namespace kerneld::server {

// A cancellation check that answers false, without asking, until `wait` has
// passed since it was made: ServerContext::IsCancelled() is cheap on the
// callback API but polls the completion queue on the sync one.
std::function<bool()> CancelCheckAfter(std::chrono::nanoseconds wait, std::function<bool()> check);
inline constexpr std::chrono::microseconds kSyncCancelCheckAfter{200};

// Runs an admitted request on the calling gRPC thread's behalf and waits
// for its completion (at once when the worker ran it inline, on this very
// thread); cancellation is asked only after kSyncCancelCheckAfter.
Status RunAndWait(RequestRunner& runner, CallControl ctl, const v1::ExecuteRequest& req,
                  v1::ExecuteResponse* resp);

// A sync bidi stream of `codec`'s messages (service/stream_codec.h), each
// admitted and run in turn, as ExecuteStream's sync loop does: counted
// against --max_streams and --quota_streams, each message admitted again,
// UNAVAILABLE after the message in hand once draining. The KServe front
// end's ModelStreamInfer (kserve/kserve_service.h) is served by it.
grpc::Status ServeSyncStream(grpc::ServerContext* ctx,
                             grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                             RequestRunner& runner, StreamCodec& codec);

// Every method raw (service/raw_unary.h): the caller is admitted before its
// message is parsed.
class KernelServiceSyncImpl final : public RawSyncService {
 public:
  KernelServiceSyncImpl(const Config& cfg, RequestRunner& runner);

  grpc::Status Execute(grpc::ServerContext* ctx, const grpc::ByteBuffer& req,
                       grpc::ByteBuffer* resp);
  // A message that does not parse ends the stream with INVALID_ARGUMENT
  // instead of looking like the client's half-close.
  grpc::Status ExecuteStreamRaw(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);

 private:
  const Config& cfg_;
  RequestRunner& runner_;
};

}  // namespace kerneld::server
