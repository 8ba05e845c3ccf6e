// Metric families built at scrape time: one unlabelled counter or gauge (the
// shape of the process_* and kerneld_jit_* series), a counter by gRPC code
// (the lane's requests, the user kernels' evaluations), and a histogram's
// metric from an AtomicHistogram snapshot (the latency series).
#pragma once

#include <prometheus/metric_family.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kerneld/status.h"
#include "metrics/atomic_histogram.h"

namespace kerneld::server {

inline prometheus::MetricFamily OneValueFamily(const char* name, const char* help,
                                               prometheus::MetricType type, double v) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  f.metric.push_back(std::move(m));
  return f;
}

// A counter family of one series per gRPC code that has counted (a series
// appears with its first count), indexed by StatusCode; each series has
// `labels` besides its code.
template <size_t N>
prometheus::MetricFamily ByCodeFamily(
    const char* name, const char* help, const std::array<std::atomic<uint64_t>, N>& by_code,
    const std::vector<prometheus::ClientMetric::Label>& labels = {}) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Counter;
  for (size_t c = 0; c < N; ++c) {
    const uint64_t v = by_code[c].load(std::memory_order_relaxed);
    if (v == 0) continue;
    prometheus::ClientMetric m;
    m.label = {{"code", std::string(StatusCodeName(static_cast<StatusCode>(c)))}};
    m.label.insert(m.label.end(), labels.begin(), labels.end());
    m.counter.value = static_cast<double>(v);
    f.metric.push_back(std::move(m));
  }
  return f;
}

// The metric of a histogram with these labels: cumulative bucket counts over
// LatencyBucketBounds(), then +Inf.
inline prometheus::ClientMetric HistogramMetric(std::vector<prometheus::ClientMetric::Label> labels,
                                                const AtomicHistogram::Snapshot& snap) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.histogram.sample_count = snap.count;
  m.histogram.sample_sum = snap.sum;
  uint64_t cum = 0;
  const auto& bounds = LatencyBucketBounds();
  for (size_t b = 0; b < bounds.size(); ++b) {
    cum += snap.counts[b];
    m.histogram.bucket.push_back({cum, bounds[b]});
  }
  m.histogram.bucket.push_back({snap.count, std::numeric_limits<double>::infinity()});
  return m;
}

}  // namespace kerneld::server
