#include "service/raw_unary.h"

#include <grpcpp/impl/codegen/method_handler.h>
#include <grpcpp/impl/codegen/rpc_service_method.h>

namespace kerneld::server {

Status ParseRawMessage(const grpc::ByteBuffer& in, google::protobuf::Message* out) {
  const size_t bytes = in.Valid() ? in.Length() : 0;
  if (bytes == 0) {  // an empty message: every field at its default
    out->Clear();
    return Status::Ok();
  }
  grpc::ByteBuffer copy(in);  // parsing consumes its buffer; a copy shares the slices
  if (grpc::GenericDeserialize<grpc::ProtoBufferReader, google::protobuf::Message>(&copy, out).ok())
    return Status::Ok();
  return InvalidArgument("the request is not a valid " + out->GetTypeName() + " (" +
                         std::to_string(bytes) +
                         " bytes): protobuf could not parse it (truncated or corrupt bytes, a "
                         "string field that is not UTF-8, or another message type)");
}

grpc::Status SerializeRawMessage(const google::protobuf::Message& m, grpc::ByteBuffer* out) {
  bool own = false;
  return grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(m, out, &own);
}

const char* RawSyncService::Path(const std::string& service, const std::string& method) {
  paths_.push_back("/" + service + "/" + method);
  return paths_.back().c_str();
}

void RawSyncService::AddUnary(const std::string& service, const std::string& method, Unary fn) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      Path(service, method), grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<RawSyncService, grpc::ByteBuffer, grpc::ByteBuffer>(
          [fn = std::move(fn)](RawSyncService*, grpc::ServerContext* ctx,
                               const grpc::ByteBuffer* in,
                               grpc::ByteBuffer* out) { return fn(ctx, *in, out); },
          this)));
}

void RawSyncService::AddBidi(const std::string& service, const std::string& method, Bidi fn) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      Path(service, method), grpc::internal::RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<RawSyncService, grpc::ByteBuffer, grpc::ByteBuffer>(
          [fn = std::move(fn)](
              RawSyncService*, grpc::ServerContext* ctx,
              grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return fn(ctx, stream);
          },
          this)));
}

}  // namespace kerneld::server
