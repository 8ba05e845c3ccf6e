// The graph replay cache's series (docs/metrics.md, "Graphs"), read from
// graph_replay.h's counters at scrape time.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

namespace kerneld::server {

// kerneld_graph_replay_hits_total, kerneld_graph_captures_total,
// kerneld_graph_updates_total, kerneld_graph_uncapturable_total,
// kerneld_graph_cache_entries.
std::vector<prometheus::MetricFamily> GraphFamilies();

}  // namespace kerneld::server
