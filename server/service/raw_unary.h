// Methods served raw (ByteBuffers), so that a call is identified from its
// metadata before its message is parsed: a call without credentials costs
// no parse (and no libprotobuf log line), and a message that does not parse
// is INVALID_ARGUMENT with a message instead of gRPC's UNIMPLEMENTED "".
// The callback API gets this from the generated WithRawCallbackMethod_*
// classes; RawSyncService gives it to the sync API (--grpc_api=sync), whose
// generated classes always parse first.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/service_type.h>
#include <grpcpp/impl/codegen/sync_stream.h>

#include <deque>
#include <functional>
#include <string>

#include "kerneld/status.h"

namespace kerneld::server {

// Parses `in` into *out: OK, or INVALID_ARGUMENT naming the message type and
// its size (the bytes are the client's: not echoed).
Status ParseRawMessage(const grpc::ByteBuffer& in, google::protobuf::Message* out);
// Serializes `m` into *out (OK, or INTERNAL when protobuf cannot).
grpc::Status SerializeRawMessage(const google::protobuf::Message& m, grpc::ByteBuffer* out);

// A grpc::Service whose methods are added by name, all raw, on the sync API.
class RawSyncService : public grpc::Service {
 public:
  using Unary =
      std::function<grpc::Status(grpc::ServerContext*, const grpc::ByteBuffer&, grpc::ByteBuffer*)>;
  using Bidi = std::function<grpc::Status(
      grpc::ServerContext*, grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>*)>;

 protected:
  // `service` is the full name ("kerneld.v1.KernelService"), `method` the
  // rpc's ("Execute").
  void AddUnary(const std::string& service, const std::string& method, Unary fn);
  void AddBidi(const std::string& service, const std::string& method, Bidi fn);

 private:
  const char* Path(const std::string& service, const std::string& method);
  std::deque<std::string> paths_;  // the methods keep their names as const char*
};

}  // namespace kerneld::server
