// kernelctl tune OP: the offline sweep (kerneld.v1.TuningService.Tune):
// every eligible implementation of OP timed on the daemon's devices for
// each dtype and problem, as kernel_bench times (GPU: L2 read-flushed,
// median of --repeats; CPU: wall-clock median), the medians merged into the
// daemon's tuning table and its --tuning_file. Admin principals only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "client.h"

namespace kerneld::client {

struct TuneOptions {
  std::string op, dtypes, shapes_file, device;
  std::vector<std::string> shapes, attrs;
  int repeats = 30, timeout_s = 3600;
  uint64_t seed = 1;
};

// Adds `tune` (with its --help) to `app`.
CLI::App* AddTuneCommand(CLI::App& app, TuneOptions* o);

// 0 done, 1 the daemon refused (the gRPC code's name and message on
// stderr), 2 a problem that does not fit the op's schema.
int TuneCommand(KernelClient& c, const TuneOptions& o);

}  // namespace kerneld::client
