// The daemon's user kernels at start-up (docs/user-kernels.md): the
// registry under the flags' policy, its compile cache (the JIT's directory),
// the launcher that runs them in the sandbox (CUDA builds), and
// kerneld.v1.AdminService on the API --grpc_api names.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "config.h"
#include "devices/device_manager.h"
#include "jit/disk_cache.h"
#include "sandbox/user_kernels.h"

namespace kerneld::server::sandbox {

struct UserKernelServices {
  std::unique_ptr<jit::DiskCache> cache;
  std::unique_ptr<UserKernelLauncher> launcher;  // null: this build cannot run them
  std::unique_ptr<UserKernelRegistry> registry;
  std::unique_ptr<grpc::Service> service;  // kerneld.v1.AdminService
  ~UserKernelServices();                   // unsets the process's registry
};

// Never null; AdminService is served whether or not user kernels are on
// (off: each method says how to turn them on).
std::unique_ptr<UserKernelServices> StartUserKernels(const Config& cfg,
                                                     const DeviceManager& devices, bool sync_api);

// The sandbox launcher of this build (sandbox_cuda.cc, or no_cuda.cc: null).
std::unique_ptr<UserKernelLauncher> MakeSandboxLauncher(const Config& cfg,
                                                        const DeviceManager& devices);

}  // namespace kerneld::server::sandbox
