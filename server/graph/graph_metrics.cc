#include "graph/graph_metrics.h"

#include "graph/graph_replay.h"
#include "metrics/one_family.h"

namespace kerneld::server {

GraphReplayStats& ReplayStats() {
  static GraphReplayStats stats;
  return stats;
}

std::vector<prometheus::MetricFamily> GraphFamilies() {
  using prometheus::MetricType;
  const GraphReplayStats& s = ReplayStats();
  auto u = [](const std::atomic<uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  std::vector<prometheus::MetricFamily> out;
  out.push_back(OneValueFamily("kerneld_graph_replay_hits_total",
                               "ExecuteGraph calls run as a replay of a cached CUDA graph.",
                               MetricType::Counter, u(s.hits)));
  out.push_back(OneValueFamily("kerneld_graph_captures_total",
                               "Request graphs captured and instantiated as CUDA graphs.",
                               MetricType::Counter, u(s.captures)));
  out.push_back(
      OneValueFamily("kerneld_graph_updates_total",
                     "Cached CUDA graphs re-captured and updated in place for new attr values.",
                     MetricType::Counter, u(s.updates)));
  out.push_back(OneValueFamily(
      "kerneld_graph_uncapturable_total",
      "Request graph captures that failed (an impl synchronizes or allocates); such a "
      "structure runs directly.",
      MetricType::Counter, u(s.uncapturable)));
  out.push_back(OneValueFamily(
      "kerneld_graph_cache_entries", "Executable CUDA graphs cached, over every device and stream.",
      MetricType::Gauge, static_cast<double>(s.entries.load(std::memory_order_relaxed))));
  return out;
}

}  // namespace kerneld::server
