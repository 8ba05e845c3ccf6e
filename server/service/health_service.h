// grpc.health.v1.Health on gRPC's sync API, for --grpc_api=sync.
//
// gRPC's default health service is a callback service, and one callback
// method in a server otherwise served by the sync API costs every request:
// gRPC 1.51 then runs "nexting" threads that poll the same connections as
// the sync threads, and they wake each other (measured on the 2-core
// machine: 5.7x the context switches a request, docs/performance.md). This
// is the same protocol (Check, Watch) and the same setter interface the
// daemon uses on the default one.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"

namespace kerneld::server {

class SyncHealthService final : public grpc::health::v1::Health::Service,
                                public grpc::HealthCheckServiceInterface {
 public:
  // Each Watch holds a sync thread for its life: at most this many at once;
  // more are refused with RESOURCE_EXHAUSTED.
  static constexpr int kMaxWatches = 64;
  // How often a Watch with nothing to say checks whether its caller left.
  static constexpr std::chrono::milliseconds kWatchPoll{200};

  SyncHealthService();  // the server as a whole ("") SERVING, as gRPC's is

  // grpc::HealthCheckServiceInterface.
  void SetServingStatus(const std::string& service, bool serving) override;
  void SetServingStatus(bool serving) override;  // every service known so far
  // NOT_SERVING everywhere and no more changes; open watches are told, then
  // end with UNAVAILABLE.
  void Shutdown() override;

  grpc::Status Check(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::health::v1::HealthCheckResponse* resp) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;
  // With mu_ held: the service's status, SERVICE_UNKNOWN if never set.
  ServingStatus StatusLocked(const std::string& service) const;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, ServingStatus> statuses_;
  bool shut_down_ = false;
  int watches_ = 0;
};

}  // namespace kerneld::server
