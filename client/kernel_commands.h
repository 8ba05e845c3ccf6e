// kernelctl kernel ...: user kernels (kerneld.v1.AdminService,
// docs/user-kernels.md): register a .cu file with a JSON spec, list,
// unregister, and evaluate one against a built-in op (error against the
// float64 reference, time beside the built-in and a device copy).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "client.h"

namespace kerneld::client {

struct KernelOptions {
  CLI::App *reg = nullptr, *list = nullptr, *unreg = nullptr, *eval = nullptr;
  std::string file, spec, name, arch;
  bool replace = false, all = false;
  // eval
  std::string against, dtype = "float32", device, json;
  std::vector<std::string> shapes, attrs;
  int iterations = 30;
  uint64_t seed = 1;
};

// Adds `kernel` and its subcommands (each with its own --help) to `app`.
CLI::App* AddKernelCommand(CLI::App& app, KernelOptions* o);

// Runs the subcommand that was parsed: 0 done, 1 the daemon refused (the
// gRPC code's name and message on stderr), 2 a bad file, spec or flag.
int KernelCommand(KernelClient& c, const KernelOptions& o);

// The spec file's JSON as a RegisterKernelRequest: its fields are the
// message's (name, entry, inputs, outputs, attrs, launch, options, doc),
// and dtypes may be written "float32" as well as "DTYPE_FLOAT32".
bool ParseKernelSpec(const std::string& json, v1::RegisterKernelRequest* req, std::string* error);

}  // namespace kerneld::client
