#include "metrics/lane_metrics.h"

#include <string>

#include "metrics/one_family.h"

namespace kerneld::server {

LaneStats& LaneStats::Global() {
  static LaneStats* stats = new LaneStats();  // never destroyed: read by late scrapes
  return *stats;
}

std::vector<prometheus::MetricFamily> LaneFamilies() {
  const LaneStats& s = LaneStats::Global();
  std::vector<prometheus::MetricFamily> out;
  out.push_back(OneValueFamily("kerneld_lanes_open", "Same-host lanes open now.",
                               prometheus::MetricType::Gauge, static_cast<double>(s.open.load())));
  out.push_back(OneValueFamily("kerneld_lanes_opened_total", "Same-host lanes opened.",
                               prometheus::MetricType::Counter,
                               static_cast<double>(s.opened.load())));
  out.push_back(OneValueFamily(
      "kerneld_lanes_refused_total",
      "Same-host lane connections refused (bad hello, credentials, --max_lanes, drain).",
      prometheus::MetricType::Counter, static_cast<double>(s.refused.load())));
  prometheus::MetricFamily req;
  req.name = "kerneld_lane_requests_total";
  req.help = "Requests answered on a same-host lane, by gRPC code (transport=lane).";
  req.type = prometheus::MetricType::Counter;
  for (size_t c = 0; c < s.requests_by_code.size(); ++c) {
    const uint64_t v = s.requests_by_code[c].load(std::memory_order_relaxed);
    if (v == 0) continue;
    prometheus::ClientMetric m;
    m.label = {{"code", std::string(StatusCodeName(static_cast<StatusCode>(c)))},
               {"transport", "lane"}};
    m.counter.value = static_cast<double>(v);
    req.metric.push_back(std::move(m));
  }
  out.push_back(std::move(req));
  return out;
}

}  // namespace kerneld::server
