#include "scheduler/tuning_metrics.h"

#include <atomic>

#include "metrics/one_family.h"

namespace kerneld::server {

namespace {
std::atomic<const TuningTable*> published{nullptr};
}  // namespace

void PublishTuningTable(const TuningTable* table) { published.store(table); }

std::vector<prometheus::MetricFamily> TuningFamilies() {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const TuningTable* t = published.load();
  if (t == nullptr) return out;
  prometheus::MetricFamily d;
  d.name = "kerneld_tuning_decisions_total";
  d.help =
      "Implementation choices the tuning table made, by kind: explore (a new bucket's trial "
      "run), recheck (a settled bucket re-timing another impl), tuned (the fastest measured), "
      "static (no measurement: the static rank).";
  d.type = MetricType::Counter;
  for (DecisionKind k : {DecisionKind::kExplore, DecisionKind::kRecheck, DecisionKind::kTuned,
                         DecisionKind::kStatic}) {
    prometheus::ClientMetric m;
    m.label = {{"kind", DecisionKindName(k)}};
    m.counter.value = static_cast<double>(t->decisions(k));
    d.metric.push_back(std::move(m));
  }
  out.push_back(std::move(d));
  out.push_back(OneValueFamily(
      "kerneld_tuning_explorations_total",
      "Runs handed to an implementation to measure it (explore + recheck decisions).",
      MetricType::Counter,
      static_cast<double>(t->decisions(DecisionKind::kExplore) +
                          t->decisions(DecisionKind::kRecheck))));
  out.push_back(OneValueFamily(
      "kerneld_tuning_exploration_seconds_total",
      "The cost of exploring: what exploring and re-checking runs took above the best median "
      "known for their bucket at the time.",
      MetricType::Counter, static_cast<double>(t->exploration_ns()) * 1e-9));
  out.push_back(OneValueFamily("kerneld_tuning_table_buckets",
                               "Buckets (op, dtypes, shape bucket, device model) in the table.",
                               MetricType::Gauge, static_cast<double>(t->size())));
  return out;
}

}  // namespace kerneld::server
