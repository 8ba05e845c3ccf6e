#include "client.h"

#include <grpcpp/health_check_service_interface.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "kerneld/status.h"

namespace kerneld::client {

namespace {
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, const ClientOptions& o,
                                           grpc::Status* init_status) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(o.max_message_mb * 1024 * 1024);
  args.SetMaxSendMessageSize(o.max_message_mb * 1024 * 1024);
  if (!o.lb_policy.empty()) args.SetLoadBalancingPolicyName(o.lb_policy);
  std::string error;
  auto ch = kerneld::client::MakeChannel(target, args, o.security ? *o.security : DefaultSecurity(),
                                         &error);
  if (ch) return ch;
  // Fail closed: a channel that reaches nothing, and the reason on every call.
  *init_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, error);
  return grpc::CreateChannel("unix:/nonexistent/kerneld-client-not-configured",
                             grpc::InsecureChannelCredentials());
}
}  // namespace

std::string StatusName(int code) {
  if (code < 0 || code > static_cast<int>(StatusCode::kUnauthenticated))
    return std::to_string(code);
  return std::string(StatusCodeName(static_cast<StatusCode>(code)));
}

std::string CheckLbPolicy(const std::string& policy) {
  if (policy.empty() || policy == "pick_first" || policy == "round_robin") return "";
  return "unknown load-balancing policy '" + policy + "' (pick_first or round_robin)";
}

KernelClient::KernelClient(const std::string& target, ClientOptions opts) : opts_(opts) {
  channel_ = MakeChannel(target, opts, &init_status_);
  stub_ = v1::KernelService::NewStub(channel_);
}

KernelClient::KernelClient(std::shared_ptr<grpc::Channel> channel, ClientOptions opts)
    : opts_(opts), channel_(std::move(channel)), stub_(v1::KernelService::NewStub(channel_)) {}

void KernelClient::ApplyTimeout(grpc::ClientContext* ctx, std::chrono::milliseconds t) const {
  if (t.count() == 0) t = opts_.default_timeout;
  if (t.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + t);
}

grpc::Status KernelClient::Execute(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                                   std::chrono::milliseconds timeout) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext ctx;
  ApplyTimeout(&ctx, timeout);
  return stub_->Execute(&ctx, req, resp);
}

grpc::Status KernelClient::ListKernels(v1::ListKernelsResponse* resp, const std::string& name) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext ctx;
  ApplyTimeout(&ctx, {});
  v1::ListKernelsRequest req;
  req.set_name(name);
  return stub_->ListKernels(&ctx, req, resp);
}

grpc::Status KernelClient::GetServerInfo(v1::GetServerInfoResponse* resp) {
  if (!init_status_.ok()) return init_status_;
  grpc::ClientContext ctx;
  ApplyTimeout(&ctx, {});
  return stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest{}, resp);
}

grpc::Status KernelClient::Health(const std::string& service, bool* serving) {
  if (!init_status_.ok()) return init_status_;
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  ApplyTimeout(&ctx, {});
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status st = stub->Check(&ctx, req, &resp);
  *serving = st.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  return st;
}

std::unique_ptr<StreamSession> KernelClient::OpenStream() {
  return std::make_unique<StreamSession>(stub_.get());
}

StreamSession::StreamSession(v1::KernelService::Stub* stub) : stream_(stub->ExecuteStream(&ctx_)) {}

StreamSession::~StreamSession() {
  if (!finished_) {
    ctx_.TryCancel();
    stream_->Finish();
  }
}

bool StreamSession::Send(const v1::ExecuteRequest& req) { return stream_->Write(req); }
bool StreamSession::Receive(v1::ExecuteResponse* resp) { return stream_->Read(resp); }

void StreamSession::CloseSend() {
  if (!closed_) stream_->WritesDone();
  closed_ = true;
}

grpc::Status StreamSession::Finish() {
  CloseSend();
  finished_ = true;
  return stream_->Finish();
}

}  // namespace kerneld::client
