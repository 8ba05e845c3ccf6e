// kernelctl graph FILE.json: runs a request graph described in JSON (the
// ExecuteGraphRequest message in protobuf's JSON form; docs/graphs.md),
// with inputs given no data drawn at random from the schema of the op that
// reads them, repeated for a latency summary, optionally from several
// clients at once, and checked against the same ops called one by one.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "client.h"

namespace kerneld::client {

struct GraphOptions {
  std::string file;
  std::string device;  // overrides the file's
  int repeat = 1;
  int concurrency = 1;
  bool check = false;
  uint64_t seed = 1;
};

// Adds `graph` (with its own --help) to `app`.
CLI::App* AddGraphCommand(CLI::App& app, GraphOptions* o);

// 0 done (and --check passed), 1 the daemon refused or --check found a
// difference, 2 a bad file.
int GraphCommand(KernelClient& c, const std::string& target, const GraphOptions& o);

}  // namespace kerneld::client
