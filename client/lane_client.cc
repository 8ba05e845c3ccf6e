#include "lane_client.h"

#include <utility>

namespace kerneld::client {

namespace {

grpc::Status ToGrpc(LaneStatus st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code), std::move(st.message));
}

}  // namespace

std::unique_ptr<LaneClient> LaneClient::Connect(const std::string& target, const std::string& token,
                                                grpc::Status* error) {
  LaneStatus st;
  std::unique_ptr<LaneRing> ring = LaneRing::Connect(target, token, &st);
  *error = ToGrpc(std::move(st));
  if (!ring) return nullptr;
  return std::unique_ptr<LaneClient>(new LaneClient(std::move(ring)));
}

LaneClient::~LaneClient() = default;

grpc::Status LaneClient::Execute(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                                 std::chrono::milliseconds timeout) {
  std::string bytes, out;
  if (!req.SerializeToString(&bytes))
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot serialize the request");
  grpc::Status st = ExecuteBytes(bytes, &out, timeout);
  if (!st.ok()) return st;
  if (!resp->ParseFromString(out))
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the lane's response is not an ExecuteResponse");
  return st;
}

grpc::Status LaneClient::ExecuteBytes(std::string_view request, std::string* out,
                                      std::chrono::milliseconds timeout) {
  return ToGrpc(ring_->Execute(request, out, static_cast<int64_t>(timeout.count()) * 1000));
}

}  // namespace kerneld::client
