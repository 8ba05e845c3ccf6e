#include "service/health_service.h"

namespace kerneld::server {

namespace health = grpc::health::v1;

SyncHealthService::SyncHealthService() { statuses_[""] = health::HealthCheckResponse::SERVING; }

void SyncHealthService::SetServingStatus(const std::string& service, bool serving) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    statuses_[service] =
        serving ? health::HealthCheckResponse::SERVING : health::HealthCheckResponse::NOT_SERVING;
  }
  changed_.notify_all();
}

void SyncHealthService::SetServingStatus(bool serving) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    for (auto& [name, st] : statuses_)
      st =
          serving ? health::HealthCheckResponse::SERVING : health::HealthCheckResponse::NOT_SERVING;
  }
  changed_.notify_all();
}

void SyncHealthService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, st] : statuses_) st = health::HealthCheckResponse::NOT_SERVING;
    shut_down_ = true;
  }
  changed_.notify_all();
}

SyncHealthService::ServingStatus SyncHealthService::StatusLocked(const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? health::HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

grpc::Status SyncHealthService::Check(grpc::ServerContext*, const health::HealthCheckRequest* req,
                                      health::HealthCheckResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  const ServingStatus st = StatusLocked(req->service());
  // The protocol: an unknown service is NOT_FOUND on Check (SERVICE_UNKNOWN
  // is Watch's answer).
  if (st == health::HealthCheckResponse::SERVICE_UNKNOWN)
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
  resp->set_status(st);
  return grpc::Status::OK;
}

grpc::Status SyncHealthService::Watch(grpc::ServerContext* ctx,
                                      const health::HealthCheckRequest* req,
                                      grpc::ServerWriter<health::HealthCheckResponse>* writer) {
  std::unique_lock<std::mutex> lock(mu_);
  if (watches_ >= kMaxWatches)
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "kerneld serves at most " + std::to_string(kMaxWatches) +
                            " health Watch streams at once; use Check, or retry later");
  ++watches_;
  struct Leave {
    SyncHealthService* s;
    std::unique_lock<std::mutex>* lock;
    ~Leave() {
      if (!lock->owns_lock()) lock->lock();
      --s->watches_;
    }
  } leave{this, &lock};
  bool first = true;
  ServingStatus last = health::HealthCheckResponse::UNKNOWN;
  for (;;) {
    const ServingStatus now = StatusLocked(req->service());
    if (first || now != last) {
      first = false;
      last = now;
      lock.unlock();
      health::HealthCheckResponse resp;
      resp.set_status(now);
      if (!writer->Write(resp)) return grpc::Status::OK;  // the client left
      lock.lock();
      continue;
    }
    // Its NOT_SERVING sent, a watch ends with the daemon: gRPC's shutdown
    // waits for every sync handler to return.
    if (shut_down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "kerneld is shutting down");
    // The sync API offers no callback when a call ends: look now and then.
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    changed_.wait_for(lock, kWatchPoll);
  }
}

}  // namespace kerneld::server
