#include "metrics/jit_metrics.h"

#include "jit/jit_stats.h"
#include "metrics/one_family.h"

namespace kerneld::server {

namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

}  // namespace

std::vector<MetricFamily> JitFamilies() {
  const jit::JitStats& s = jit::Stats();
  auto u = [](const std::atomic<uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  std::vector<MetricFamily> out;
  out.push_back(
      OneValueFamily("kerneld_jit_cache_hits_total",
                     "JIT kernels found compiled in the disk cache (or compiled meanwhile by "
                     "another daemon).",
                     MetricType::Counter, u(s.hits)));
  out.push_back(OneValueFamily("kerneld_jit_cache_misses_total",
                               "JIT kernels that had to be compiled.", MetricType::Counter,
                               u(s.misses)));
  out.push_back(OneValueFamily("kerneld_jit_compiles_total", "NVRTC compiles that succeeded.",
                               MetricType::Counter, u(s.compiles)));
  out.push_back(OneValueFamily("kerneld_jit_compile_failures_total", "NVRTC compiles that failed.",
                               MetricType::Counter, u(s.compile_failures)));
  out.push_back(OneValueFamily("kerneld_jit_cache_corrupt_total",
                               "Cache entries that failed their check, removed and rebuilt.",
                               MetricType::Counter, u(s.corrupt)));
  out.push_back(OneValueFamily("kerneld_jit_cache_evictions_total",
                               "Cache entries removed to keep the cache under --jit_cache_max_mb.",
                               MetricType::Counter, u(s.evictions)));
  out.push_back(OneValueFamily("kerneld_jit_cache_entries", "Compiled kernels in the disk cache.",
                               MetricType::Gauge,
                               static_cast<double>(s.entries.load(std::memory_order_relaxed))));
  out.push_back(OneValueFamily("kerneld_jit_cache_bytes", "Bytes of the disk cache's entries.",
                               MetricType::Gauge,
                               static_cast<double>(s.bytes.load(std::memory_order_relaxed))));

  MetricFamily h;
  h.name = "kerneld_jit_compile_seconds";
  h.help = "Wall time of each successful NVRTC compile.";
  h.type = MetricType::Histogram;
  h.metric.push_back(HistogramMetric({}, s.compile_seconds.Read()));
  out.push_back(std::move(h));
  return out;
}

}  // namespace kerneld::server
