// The user kernels' sandbox series (docs/metrics.md, "User kernels"):
// sandbox/sandbox_stats.h's counters as Prometheus families, read at
// scrape time. Requests of a user kernel are counted in the request series
// under its name (backend "nvrtc"); these say what happened to the workers.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

namespace kerneld::server {

// kerneld_sandbox_starts_total, kerneld_sandbox_replacements_total{reason},
// kerneld_sandbox_last_start_seconds,
// kerneld_user_kernel_evaluations_total{code}.
std::vector<prometheus::MetricFamily> SandboxFamilies();

}  // namespace kerneld::server
