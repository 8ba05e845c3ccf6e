// Metric families built at scrape time: one unlabelled counter or gauge (the
// shape of the process_* and kerneld_jit_* series), and a histogram's
// metric from an AtomicHistogram snapshot (the latency series).
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

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
