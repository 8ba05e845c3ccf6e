// The JIT's series (docs/metrics.md, "JIT"): jit/jit_stats.h's counters
// as Prometheus families, read at scrape time.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

namespace kerneld::server {

// kerneld_jit_cache_hits_total, kerneld_jit_cache_misses_total,
// kerneld_jit_compiles_total, kerneld_jit_compile_failures_total,
// kerneld_jit_compile_seconds (histogram), kerneld_jit_cache_corrupt_total,
// kerneld_jit_cache_evictions_total, kerneld_jit_cache_entries,
// kerneld_jit_cache_bytes.
std::vector<prometheus::MetricFamily> JitFamilies();

}  // namespace kerneld::server
