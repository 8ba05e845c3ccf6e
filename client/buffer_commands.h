// kernelctl buffers ...: list, register, renew and unregister shared
// buffers from the command line (an operator's view of what a principal
// holds; the isolation and confused-deputy tests drive the daemon with it).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "client.h"

namespace kerneld::client {

struct BuffersOptions {
  CLI::App *list = nullptr, *register_shm = nullptr, *renew = nullptr, *unregister = nullptr;
  bool all = false;
  std::string name, id;
  uint64_t bytes = 0, offset = 0;
  uint32_t lease = 0;
};

// Adds `buffers` and its subcommands (each with its own --help) to `app`.
CLI::App* AddBuffersCommand(CLI::App& app, BuffersOptions* o);

// Runs the subcommand that was parsed. Returns the process exit code: 0
// done, 1 the daemon refused (the gRPC code's name and message on stderr).
int BuffersCommand(KernelClient& c, const BuffersOptions& o);

}  // namespace kerneld::client
