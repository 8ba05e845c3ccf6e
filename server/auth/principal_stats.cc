#include "auth/principal_stats.h"

#include <algorithm>

#include "buffers/buffer_registry.h"

namespace kerneld::server {

PrincipalStats& PrincipalStats::Global() {
  static PrincipalStats* s = new PrincipalStats();  // never destroyed: requests may outlive main
  return *s;
}

std::shared_ptr<std::atomic<int64_t>> PrincipalStats::Inflight(const Principal& who) {
  std::lock_guard<std::mutex> lock(mu_);
  // Anonymous connections share one counter (QuotaPrincipal): one each
  // would be kept forever, and the quota is theirs together.
  auto& slot = inflight_[std::string(QuotaPrincipal(who))];
  if (!slot) slot = std::make_shared<std::atomic<int64_t>>(0);
  return slot;
}

namespace {

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType t) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = t;
  return f;
}

void AddValue(prometheus::MetricFamily* f, double v,
              std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (f->type == prometheus::MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  f->metric.push_back(std::move(m));
}

}  // namespace

std::vector<prometheus::MetricFamily> PrincipalStats::Collect(const BufferRegistry* buffers) const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  auto exceeded =
      Family("kerneld_principal_quota_exceeded_total",
             "Requests refused with RESOURCE_EXHAUSTED because a principal's quota was reached.",
             MetricType::Counter);
  const char* names[] = {"bytes", "buffers", "inflight"};
  for (int i = 0; i < 3; ++i)
    AddValue(&exceeded, static_cast<double>(quota_exceeded_[i].load()), {{"quota", names[i]}});
  out.push_back(std::move(exceeded));
  auto auth =
      Family("kerneld_principal_auth_failures_total",
             "Calls refused: UNAUTHENTICATED (no or unknown identity) or PERMISSION_DENIED (role, "
             "or a shared-memory object the caller could not open itself).",
             MetricType::Counter);
  AddValue(&auth, static_cast<double>(unauthenticated_.load()), {{"code", "UNAUTHENTICATED"}});
  AddValue(&auth, static_cast<double>(permission_denied_.load()), {{"code", "PERMISSION_DENIED"}});
  out.push_back(std::move(auth));

  int64_t max_inflight = 0, busy = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [_, n] : inflight_) {
      const int64_t v = n->load();
      max_inflight = std::max(max_inflight, v);
      busy += v > 0;
    }
  }
  uint64_t max_bytes = 0, max_buffers = 0, holders = 0;
  if (buffers != nullptr) {
    for (const auto& [_, u] : buffers->UsageByPrincipal()) {
      max_bytes = std::max(max_bytes, u.bytes);
      max_buffers = std::max(max_buffers, u.buffers);
      holders += u.buffers > 0;
    }
  }
  auto g = [&](const char* name, const char* help, double v) {
    auto f = Family(name, help, MetricType::Gauge);
    AddValue(&f, v);
    out.push_back(std::move(f));
  };
  g("kerneld_principal_holding_buffers", "Principals that hold at least one buffer.",
    static_cast<double>(holders));
  g("kerneld_principal_max_buffer_bytes",
    "The most bytes (registered + allocated) any one principal holds: compare with --quota_bytes.",
    static_cast<double>(max_bytes));
  g("kerneld_principal_max_buffers",
    "The most buffers any one principal holds: compare with --quota_buffers.",
    static_cast<double>(max_buffers));
  g("kerneld_principal_requests_inflight_max",
    "The most requests in flight for any one identified principal: compare with --quota_inflight.",
    static_cast<double>(max_inflight));
  g("kerneld_principal_with_requests_inflight", "Identified principals with requests in flight.",
    static_cast<double>(busy));
  return out;
}

}  // namespace kerneld::server
