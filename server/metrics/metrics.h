// kerneld's Prometheus metrics (docs/metrics.md lists them).
//
// The request path holds a Series* per (op, backend, device), created once
// and cached; observing is lock-free (AtomicHistogram). Gauges that describe
// state (queue depth, in flight, buffers, device memory, health) are read at
// scrape time from their owners instead of being pushed on every change.
// Label values come only from bounded sets: registered op names (or
// "_unknown"), known backends, devices, gRPC code names.
#pragma once

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kerneld/status.h"
#include "metrics/atomic_histogram.h"
#include "metrics/metrics_http_server.h"

namespace kerneld::server {

class DeviceManager;
class BufferRegistry;

// How a request came (the `transport` label of the request series): the
// gRPC front ends (kerneld.v1, KServe) or the same-host lane.
enum class Transport : uint8_t { kGrpc = 0, kLane = 1 };
inline constexpr size_t kTransports = 2;
inline const char* TransportName(Transport t) { return t == Transport::kLane ? "lane" : "grpc"; }

class Metrics : public prometheus::Collectable {
 public:
  struct Series {
    std::string op, backend, device;
    Transport transport = Transport::kGrpc;
    std::array<std::atomic<AtomicHistogram*>, 17> request_by_code{};  // indexed by StatusCode
    AtomicHistogram queue, execute;
    std::atomic<bool> executed{false};  // queue/execute exported once observed
    ~Series();
  };

  Metrics();
  ~Metrics() override;

  // Serves /metrics on addr (metrics/metrics_http_server.h); "" or an
  // error for the user.
  std::string Listen(const std::string& addr);
  int port() const;
  // Closes the port and its connections at once. Idempotent.
  void Stop();
  // Where scrape-time gauges come from (either may be null).
  void SetSources(const DeviceManager* devices, const BufferRegistry* buffers);

  Series* For(const std::string& op, const std::string& backend, const std::string& device,
              Transport transport = Transport::kGrpc);
  void ObserveRequest(Series* s, StatusCode code, double seconds);
  // Requests answered so far, every series and code (a scan: for the drain,
  // not the request path).
  uint64_t RequestsAnswered() const;
  void ObserveQueueAndExecute(Series* s, double queue_s, double execute_s);
  // An op's requests so far, every backend and device together, from the
  // series above (the KServe front end's ModelStatistics); a scan.
  struct OpTotals {
    uint64_t ok = 0, failed = 0;    // answered, by code OK or not
    double ok_s = 0, failed_s = 0;  // their time from arrival to answer
    uint64_t executed = 0;          // ran on a worker
    double queue_s = 0, execute_s = 0;
  };
  OpTotals Totals(const std::string& op) const;
  void AddTransferred(bool in, bool buffer, uint64_t bytes) {
    transferred_[(in ? 0 : 2) + (buffer ? 1 : 0)].fetch_add(bytes, std::memory_order_relaxed);
  }

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::unique_ptr<MetricsHttpServer> server_;
  const DeviceManager* devices_ = nullptr;
  const BufferRegistry* buffers_ = nullptr;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Series>> series_;
  std::array<std::atomic<uint64_t>, 4>
      transferred_{};  // in/inline, in/buffer, out/inline, out/buffer
};

}  // namespace kerneld::server
