// kernelctl jit ...: warm the nvrtc backend's cache ahead of first use and
// list it (kerneld.v1.JitService, docs/jit.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "client.h"

namespace kerneld::client {

struct JitOptions {
  CLI::App *warm = nullptr, *list = nullptr;
  std::string op, dtype = "bfloat16", shape, arch;
  int sm_count = 0;
};

// Adds `jit` and its subcommands (each with its own --help) to `app`.
CLI::App* AddJitCommand(CLI::App& app, JitOptions* o);

// Runs the subcommand that was parsed: 0 done, 1 the daemon refused (the
// gRPC code's name and message on stderr), 2 a bad --shape.
int JitCommand(KernelClient& c, const JitOptions& o);

}  // namespace kerneld::client
