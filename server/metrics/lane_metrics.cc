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
  out.push_back(
      ByCodeFamily("kerneld_lane_requests_total",
                   "Requests answered on a same-host lane, by gRPC code (transport=lane).",
                   s.requests_by_code, {{"transport", "lane"}}));
  return out;
}

}  // namespace kerneld::server
