#include "kserve/kserve_stream.h"

#include <string>

namespace kerneld::server::kserve {

namespace {

struct Message : StreamCodec::State {
  inference::ModelInferRequest req;
  InferState state;
};

}  // namespace

std::string StreamErrorMessage(const Status& st) {
  return std::string(StatusCodeName(st.code())) + ": " + st.message();
}

bool KServeStreamCodec::Parse(grpc::ByteBuffer* in, v1::ExecuteRequest* req,
                              std::unique_ptr<State>* state, Status* refused) {
  auto m = std::make_unique<Message>();
  if (!grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(in, &m->req).ok())
    return false;
  *refused = handlers_.DecodeInfer(who_, &m->req, req, &m->state);
  if (m->state.op == nullptr) m->state.id = m->req.id();  // the answer names it even so
  *state = std::move(m);
  return true;
}

grpc::Status KServeStreamCodec::Malformed(int64_t n, size_t bytes) const {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "ModelStreamInfer message " + std::to_string(n) +
                          " is not a valid inference.ModelInferRequest (" + std::to_string(bytes) +
                          " bytes)");
}

void KServeStreamCodec::Serialize(const Status& refused, v1::ExecuteResponse* resp, State* state,
                                  grpc::ByteBuffer* out) {
  // No state: a message the sync loop did not parse (its caller was refused).
  static const Message kUnparsed;
  const Message* m = state != nullptr ? static_cast<const Message*>(state) : &kUnparsed;
  inference::ModelStreamInferResponse answer;
  Status st = refused;
  if (st.ok() && resp->status().code() != 0)
    st = Status(static_cast<StatusCode>(resp->status().code()), resp->status().message());
  if (st.ok() && m->state.op == nullptr)
    st = Internal("a ModelStreamInfer answer without its request");
  if (st.ok()) st = EncodeInfer(resp, m->state, answer.mutable_infer_response());
  if (!st.ok()) {
    answer.Clear();
    answer.set_error_message(StreamErrorMessage(st));
    inference::ModelInferResponse* r = answer.mutable_infer_response();
    if (m->state.op != nullptr) r->set_model_name(m->state.op->name);  // not a client's 100 kB
    r->set_id(m->state.id);
  }
  bool own = false;
  out->Clear();
  if (grpc::SerializationTraits<inference::ModelStreamInferResponse>::Serialize(answer, out, &own)
          .ok())
    return;
  inference::ModelStreamInferResponse small;
  small.set_error_message("INTERNAL: the response could not be serialized");
  small.mutable_infer_response()->set_id(m->state.id);
  out->Clear();
  (void)grpc::SerializationTraits<inference::ModelStreamInferResponse>::Serialize(small, out, &own);
}

}  // namespace kerneld::server::kserve
