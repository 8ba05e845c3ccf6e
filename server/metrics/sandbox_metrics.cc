#include "metrics/sandbox_metrics.h"

#include <string>

#include "metrics/one_family.h"
#include "sandbox/sandbox_stats.h"

namespace kerneld::server {

std::vector<prometheus::MetricFamily> SandboxFamilies() {
  const sandbox::SandboxStats& s = sandbox::SandboxStats::Global();
  auto u = [](const std::atomic<uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  std::vector<prometheus::MetricFamily> out;
  out.push_back(OneValueFamily("kerneld_sandbox_starts_total",
                               "User-kernel sandbox workers started (kerneld --sandbox-worker), "
                               "the first of each GPU included.",
                               prometheus::MetricType::Counter, u(s.starts)));
  prometheus::MetricFamily rep;
  rep.name = "kerneld_sandbox_replacements_total";
  rep.help =
      "Sandbox workers killed and replaced, by what ended them: a user kernel's fault, a run "
      "past --user_kernel_timeout_ms, or the worker's death.";
  rep.type = prometheus::MetricType::Counter;
  for (const auto& [reason, v] : {std::pair<const char*, double>{"fault", u(s.faults)},
                                  {"timeout", u(s.timeouts)},
                                  {"crash", u(s.crashes)}}) {
    prometheus::ClientMetric m;
    m.label = {{"reason", reason}};
    m.counter.value = v;
    rep.metric.push_back(std::move(m));
  }
  out.push_back(std::move(rep));
  out.push_back(OneValueFamily(
      "kerneld_sandbox_last_start_seconds",
      "How long the last sandbox worker took from its start to answering its first ping.",
      prometheus::MetricType::Gauge, u(s.start_ns) / 1e9));
  out.push_back(ByCodeFamily("kerneld_user_kernel_evaluations_total",
                             "EvaluateKernel calls, by gRPC code.", s.evaluations_by_code));
  return out;
}

}  // namespace kerneld::server
