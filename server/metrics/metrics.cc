#include "metrics/metrics.h"

#include <prometheus/histogram.h>

namespace kerneld::server {

std::vector<double> Metrics::LatencyBuckets() {
  std::vector<double> b;
  for (double v = 5e-6; v < 10.5; v *= 2) b.push_back(v);
  return b;
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  request_duration_ = &prometheus::BuildHistogram()
                           .Name("kerneld_request_duration_seconds")
                           .Help("Time from a request's arrival to its response, by op, "
                                 "backend, device and gRPC status code.")
                           .Register(*registry_);
  requests_total_ = &prometheus::BuildCounter()
                         .Name("kerneld_requests_total")
                         .Help("Requests answered, by op, backend, device and gRPC status code.")
                         .Register(*registry_);
}

std::string Metrics::Listen(const std::string& addr) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(addr, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return "cannot serve metrics on " + addr + ": " + e.what() +
           " (is another kerneld running? use --metrics_listen=HOST:PORT or 'off')";
  }
  exposer_->RegisterCollectable(registry_);
  return "";
}

int Metrics::port() const {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::ObserveRequest(const std::string& op, const std::string& backend,
                             const std::string& device, const std::string& code,
                             double seconds) {
  std::string key = op + '\0' + backend + '\0' + device + '\0' + code;
  Series* s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(key);
    if (it == series_.end()) {
      prometheus::Labels labels{{"op", op}, {"backend", backend}, {"device", device}, {"code", code}};
      Series ns{&request_duration_->Add(labels, LatencyBuckets()), &requests_total_->Add(labels)};
      it = series_.emplace(std::move(key), ns).first;
    }
    s = &it->second;
  }
  // prometheus-cpp's Histogram and Counter are internally synchronized.
  s->duration->Observe(seconds);
  s->total->Increment();
}

}  // namespace kerneld::server
