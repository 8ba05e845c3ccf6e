// ListKernels' view of the tuning table (KernelInfo.tuning): per bucket and
// device model, the measured implementations and the chosen one.
#pragma once

#include <string>

#include "kerneld/v1/kerneld.pb.h"
#include "scheduler/tuning_table.h"

namespace kerneld::server {

void AddTuningBuckets(const TuningTable& table, const std::string& op, v1::KernelInfo* info);

}  // namespace kerneld::server
