// kernelctl buffers ...: list, register, renew and unregister shared
// buffers from the command line (an operator's view of what a principal
// holds; the isolation and confused-deputy tests drive the daemon with it).
#pragma once

#include <string>
#include <vector>

#include "client.h"

namespace kerneld::client {

extern const char kBuffersUsage[];

// `args` follows "buffers". Returns the process exit code: 0 done, 1 the
// daemon refused (the gRPC code and message on stderr), 2 a usage mistake.
int BuffersCommand(KernelClient& c, std::vector<std::string> args);

}  // namespace kerneld::client
