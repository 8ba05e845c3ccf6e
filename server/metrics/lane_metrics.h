// The same-host lane's series (docs/metrics.md, docs/lane.md): lanes open,
// lanes opened and refused, and requests answered on a lane by code. The
// request histograms (kerneld_request_duration_seconds, ...) count lane
// requests too, as they count gRPC's: these say which of them came by lane.
#pragma once

#include <prometheus/metric_family.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "kerneld/status.h"

namespace kerneld::server {

struct LaneStats {
  std::atomic<int64_t> open{0};
  std::atomic<uint64_t> opened{0};
  std::atomic<uint64_t> refused{0};
  std::array<std::atomic<uint64_t>, 17> requests_by_code{};  // indexed by StatusCode
  void CountRequest(StatusCode code) {
    const auto c = static_cast<size_t>(code);
    if (c < requests_by_code.size()) requests_by_code[c].fetch_add(1, std::memory_order_relaxed);
  }
  static LaneStats& Global();
};

// kerneld_lanes_open, kerneld_lanes_opened_total, kerneld_lanes_refused_total,
// kerneld_lane_requests_total{code}.
std::vector<prometheus::MetricFamily> LaneFamilies();

}  // namespace kerneld::server
