// kernelctl perf --lane: closed-loop load on the same-host lane (docs/lane.md)
// beside the same request over gRPC, interleaved level by level so that the
// ratio stays meaningful on a noisy machine.
#pragma once

#include <string>
#include <vector>

#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::client {

struct LanePerfOptions {
  std::string lane_path;    // --lane
  std::string grpc_target;  // the gRPC side of the comparison; "" for none
  std::string token;
  std::vector<int> concurrency = {1};
  int window_ms = 1000;  // each transport's time at each level
};

// Prints one line per level and transport (p50, p99, req/s) and the lane's
// ratio to gRPC. 0, or 1 when a request failed or the lane was refused.
int RunLanePerf(const LanePerfOptions& o, const v1::ExecuteRequest& req);

}  // namespace kerneld::client
