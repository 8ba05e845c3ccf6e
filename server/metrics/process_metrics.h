// The standard process_* series every Prometheus exporter carries (the names
// and meanings of the Prometheus client libraries' process collector), read
// from /proc/self at scrape time.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

namespace kerneld::server {

// process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds,
// process_start_time_seconds; a series whose source cannot be read is left
// out rather than reported as 0.
std::vector<prometheus::MetricFamily> ProcessFamilies();

}  // namespace kerneld::server
