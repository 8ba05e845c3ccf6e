// ModelStreamInfer's messages for the stream machinery kerneld.v1's
// ExecuteStream runs on (service/stream_codec.h): each ModelInferRequest is
// decoded as ModelInfer's is and run by the same RequestRunner; the answers
// come in completion order, each a ModelStreamInferResponse whose
// infer_response carries the request's id. A request that fails answers
// in band, error_message "CODE: kerneld's message" (the protocol has no
// code field), and the stream goes on; bytes that are not a
// ModelInferRequest end the stream with INVALID_ARGUMENT.
#pragma once

#include "kserve/kserve_handlers.h"
#include "service/stream_codec.h"

namespace kerneld::server::kserve {

class KServeStreamCodec final : public StreamCodec {
 public:
  // For one stream of the admitted `who` (whose regions its requests name).
  KServeStreamCodec(const KServeHandlers& handlers, Principal who)
      : handlers_(handlers), who_(std::move(who)) {}

  bool Parse(grpc::ByteBuffer* in, v1::ExecuteRequest* req, std::unique_ptr<State>* state,
             Status* refused) override;
  grpc::Status Malformed(int64_t n, size_t bytes) const override;
  void Serialize(const Status& refused, v1::ExecuteResponse* resp, State* state,
                 grpc::ByteBuffer* out) override;

 private:
  const KServeHandlers& handlers_;
  const Principal who_;
};

// "INVALID_ARGUMENT: scale: ...": a status as a stream answer's error_message.
std::string StreamErrorMessage(const Status& st);

}  // namespace kerneld::server::kserve
