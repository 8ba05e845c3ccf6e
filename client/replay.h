// `kernelctl replay`: re-runs a captured workload (--trace_file lines)
// against a daemon with fresh random data of the same dtypes and shapes.
#pragma once

#include <map>
#include <string>

#include "client.h"

namespace kerneld::client {

struct ReplayOptions {
  int concurrency = 4;
  double speed = 0;  // 0: as fast as possible; X: original arrival times / X
};

struct OpReplayStats {
  int64_t sent = 0;
  std::map<std::string, int64_t> codes;  // gRPC code name -> count
  std::vector<double> latency_us;        // this replay, client-side
  std::vector<double> recorded_us;       // total_ns from the trace
};

// Returns false with *error when the trace cannot be read.
bool Replay(KernelClient& c, const std::string& path, const ReplayOptions& opt,
            std::map<std::string, OpReplayStats>* per_op, double* seconds, std::string* error);

}  // namespace kerneld::client
