// A metric family holding one unlabelled counter or gauge: the shape of the
// process_* and kerneld_jit_* series, read at scrape time.
#pragma once

#include <prometheus/metric_family.h>

#include <utility>

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

}  // namespace kerneld::server
