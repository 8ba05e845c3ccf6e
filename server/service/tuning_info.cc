#include "service/tuning_info.h"

namespace kerneld::server {

void AddTuningBuckets(const TuningTable& table, const std::string& op, v1::KernelInfo* info) {
  v1::TuningBucket* b = nullptr;
  // Rows come sorted by op, model, dtypes, bucket, impl: a bucket's rows are adjacent.
  for (const TuningRow& r : table.Rows(op)) {
    if (b == nullptr || b->device_model() != r.model || b->dtypes() != r.dtypes ||
        b->bucket() != r.bucket) {
      b = info->add_tuning();
      b->set_dtypes(r.dtypes);
      b->set_bucket(r.bucket);
      b->set_device_model(r.model);
    }
    if (r.chosen) b->set_chosen(r.impl);
    v1::TuningTime* t = b->add_times();
    t->set_backend(r.impl);
    t->set_median_ns(r.median_ns > 0 ? r.median_ns : r.ewma_ns);
    t->set_runs(r.runs);
  }
}

}  // namespace kerneld::server
