// Prometheus metrics. Series are created once per label set and cached, so
// the request path does a hash lookup under a short lock, never a registry
// lookup. Label values come only from bounded sets (registered ops, known
// backends, devices, gRPC code names): clients cannot create series.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace kerneld::server {

class Metrics {
 public:
  Metrics();

  // Starts the HTTP exposer on addr ("127.0.0.1:9400"); returns "" or an error.
  std::string Listen(const std::string& addr);
  // Port the exposer bound (for --metrics_listen with port 0), or 0.
  int port() const;

  void ObserveRequest(const std::string& op, const std::string& backend,
                      const std::string& device, const std::string& code, double seconds);

  prometheus::Registry& registry() { return *registry_; }

  // Log-spaced bucket bounds, 5 us to ~10 s.
  static std::vector<double> LatencyBuckets();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Histogram>* request_duration_;
  prometheus::Family<prometheus::Counter>* requests_total_;

  struct Series {
    prometheus::Histogram* duration;
    prometheus::Counter* total;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Series> series_;
};

}  // namespace kerneld::server
