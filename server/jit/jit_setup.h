// The daemon's JIT at start-up: the engine for the nvrtc impls
// (kerneld/jit.h) over the daemon's GPUs, with the flags' mode and cache,
// and the --jit_warm list compiled before serving.
#pragma once

#include <memory>
#include <string>

#include "config.h"
#include "devices/device_manager.h"
#include "jit/jit_backend.h"

namespace kerneld::server {

// Never null. *error is set (and start-up should stop) only for a
// --jit_warm file that cannot be read or names a kernel that cannot be
// compiled; a missing libnvrtc or an unusable cache directory only turns
// the backend or the cache off, with a log line.
std::unique_ptr<jit::JitBackend> StartJit(const Config& cfg, const DeviceManager& devices,
                                          std::string* error);

// kerneld --jit_precompile_arch=sm_90 --jit_warm=FILE: compiles every
// kernel of the list for that architecture (planned for
// --jit_precompile_sms SMs) into --jit_cache_dir and returns the exit
// status, without a GPU, devices or listening sockets: a container image
// built on a host without a GPU carries a warmed cache. Every line must
// compile (exit 1 otherwise, with the line).
int PrecompileJit(const Config& cfg);

}  // namespace kerneld::server
