// The wire form of a bidirectional stream's messages, around the
// kerneld.v1 request and response that RequestRunner takes: kerneld.v1's
// own ExecuteStream (V1StreamCodec), or another protocol's (KServe v2's
// ModelStreamInfer, kserve/kserve_stream.h). ExecuteStreamReactor and the
// sync stream loop (sync_service.h) serve any of them, so the window, the
// byte limits, the drain and the ordering rules are the same whatever the
// messages are.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>

#include "kerneld/status.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::server {

class StreamCodec {
 public:
  // What one message keeps beyond its request and response until its
  // answer is serialized.
  struct State {
    virtual ~State() = default;
  };
  virtual ~StreamCodec() = default;

  // One message from *in (consumed) into *req. false: the bytes are not a
  // message of the protocol, and the stream ends with Malformed once the
  // answers already due are written. *refused set not OK: the message
  // parsed but is answered with that status without running, and the
  // stream goes on.
  virtual bool Parse(grpc::ByteBuffer* in, v1::ExecuteRequest* req, std::unique_ptr<State>* state,
                     Status* refused) = 0;
  // The status that ends a stream whose n-th message (of `bytes`) did not parse.
  virtual grpc::Status Malformed(int64_t n, size_t bytes) const = 0;
  // The answer into *out (emptied first): `refused` when it is not OK,
  // else the runner's *resp, whose status may be an error. May move bytes
  // out of *resp.
  virtual void Serialize(const Status& refused, v1::ExecuteResponse* resp, State* state,
                         grpc::ByteBuffer* out) = 0;
};

// kerneld.v1.KernelService.ExecuteStream: ExecuteRequest in, ExecuteResponse
// out; it refuses nothing itself (the runner does).
class V1StreamCodec final : public StreamCodec {
 public:
  bool Parse(grpc::ByteBuffer* in, v1::ExecuteRequest* req, std::unique_ptr<State>* state,
             Status* refused) override;
  grpc::Status Malformed(int64_t n, size_t bytes) const override;
  void Serialize(const Status& refused, v1::ExecuteResponse* resp, State* state,
                 grpc::ByteBuffer* out) override;
};

}  // namespace kerneld::server
