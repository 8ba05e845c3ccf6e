// The tuning table's series (docs/metrics.md, "Scheduling"), read at scrape
// time from the table the daemon publishes here.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

#include "scheduler/tuning_table.h"

namespace kerneld::server {

// The table scrapes read (nullptr: none; the daemon sets it once serving
// and clears it before the table goes away).
void PublishTuningTable(const TuningTable* table);

// kerneld_tuning_decisions_total{kind}, kerneld_tuning_explorations_total,
// kerneld_tuning_exploration_seconds_total, kerneld_tuning_table_buckets;
// nothing before a table is published.
std::vector<prometheus::MetricFamily> TuningFamilies();

}  // namespace kerneld::server
