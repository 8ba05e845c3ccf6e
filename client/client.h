// kerneld C++ client: a thin, typed layer over the generated stubs.
//
//   kerneld::client::KernelClient c("127.0.0.1:50051");
//   auto req = ...;  // see tensor_util.h for building tensors
//   v1::ExecuteResponse resp;
//   grpc::Status st = c.Execute(req, &resp);
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "credentials.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::client {

namespace v1 = ::kerneld::v1;

struct ClientOptions {
  ClientOptions() = default;
  ClientOptions(int max_mb, std::chrono::milliseconds timeout,
                std::optional<ClientSecurity> sec = std::nullopt)
      : max_message_mb(max_mb), default_timeout(timeout), security(std::move(sec)) {}
  int max_message_mb = 256;
  std::chrono::milliseconds default_timeout{0};  // 0: none
  // TLS and token (credentials.h); unset: DefaultSecurity().
  std::optional<ClientSecurity> security;
  // gRPC load-balancing policy: "" (gRPC's default, pick_first), "pick_first"
  // or "round_robin". With a target that resolves to several addresses
  // (dns:///kerneld-headless:50051, ipv4:10.0.0.1:50051,10.0.0.2:50051)
  // round_robin spreads requests over all of them (docs/deploy.md).
  std::string lb_policy;
};

// A gRPC status code by its name ("UNAVAILABLE"): what kernelctl prints and
// scripts match on. A code gRPC does not define prints as its number.
std::string StatusName(int code);

// "" when `policy` is one ClientOptions::lb_policy accepts, else why not.
std::string CheckLbPolicy(const std::string& policy);

// A bidirectional ExecuteStream. Send and Receive may run on two threads
// (one each); responses arrive in completion order, matched by request_id.
class StreamSession {
 public:
  explicit StreamSession(v1::KernelService::Stub* stub);
  ~StreamSession();
  bool Send(const v1::ExecuteRequest& req);
  bool Receive(v1::ExecuteResponse* resp);
  // No more requests; Receive then drains the remaining responses.
  void CloseSend();
  grpc::Status Finish();
  void Cancel() { ctx_.TryCancel(); }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ExecuteRequest, v1::ExecuteResponse>> stream_;
  bool closed_ = false;
  bool finished_ = false;
};

class KernelClient {
 public:
  explicit KernelClient(const std::string& target, ClientOptions opts = {});
  explicit KernelClient(std::shared_ptr<grpc::Channel> channel, ClientOptions opts = {});
  const ClientOptions& options() const { return opts_; }

  grpc::Status Execute(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds{0});
  grpc::Status ListKernels(v1::ListKernelsResponse* resp, const std::string& name = "");
  grpc::Status GetServerInfo(v1::GetServerInfoResponse* resp);
  // grpc.health.v1 Check; *serving is true when SERVING.
  grpc::Status Health(const std::string& service, bool* serving);
  std::unique_ptr<StreamSession> OpenStream();

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // Not OK when the channel could not be made (an unreadable TLS file): every
  // call then answers this status.
  const grpc::Status& init_status() const { return init_status_; }
  v1::KernelService::Stub* stub() { return stub_.get(); }

 private:
  void ApplyTimeout(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const;
  ClientOptions opts_;
  grpc::Status init_status_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KernelService::Stub> stub_;
};

}  // namespace kerneld::client
