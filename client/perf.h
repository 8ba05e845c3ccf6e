// kernelctl perf: a closed- or open-loop load generator for kerneld,
// modelled on perf_analyzer. It measures in windows until three in a row
// agree, and can run every level against a reference "floor" server too
// (bench/echo_floor_server.cc), interleaved, to report ratios that stay
// meaningful on a noisy shared machine. docs/performance.md has the method.
#pragma once

#include <string>
#include <vector>

#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::client {

enum class PerfMode { kUnary, kStream };

struct PerfOptions {
  std::string target;        // kerneld
  std::string floor_target;  // --compare-floor: a floor server; "" for none
  std::string lb_policy;     // kernelctl --lb: "" (pick_first) or round_robin
  // Closed loop: one level per value, that many clients each with one
  // request in flight. Ignored when request_rates is set.
  std::vector<int> concurrency = {1};
  // Open loop (--request-rate): one level per rate (requests/s), sent on a
  // fixed schedule whatever the latency; latency counts from the scheduled
  // time so a slow server cannot hide its queueing (coordinated omission).
  std::vector<double> request_rates;
  int connections = 0;  // 0: each client its own connection; N: N shared ones
  PerfMode mode = PerfMode::kUnary;
  int window_ms = 1000;
  int max_windows = 10;
  double stability = 0.10;  // three windows within this of their mean
  std::string json_path;    // "" for none
  int max_message_mb = 256;
};

// "1,4,16" -> {1, 4, 16}; false on an empty, malformed or non-positive item.
bool ParsePositiveList(const std::string& text, std::vector<double>* out);

// Runs every level (and the floor's, when set), prints a table on stdout and
// a progress line on stderr, writes the JSON records. Returns the exit
// status: 0, or 1 when any request failed or a target was unreachable.
// floor_req: what the floor is sent, when it differs from req (a buffer
// registered there under another id); null: req.
int RunPerf(const PerfOptions& opts, const v1::ExecuteRequest& req,
            const v1::ExecuteRequest* floor_req = nullptr);

}  // namespace kerneld::client
