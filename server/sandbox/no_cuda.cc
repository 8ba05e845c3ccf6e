// A build without CUDA has no sandbox: user kernels register (NVRTC needs no
// GPU) and list, and their nvrtc impl is never eligible (no CUDA device).
#include "sandbox/user_kernel_setup.h"

namespace kerneld::server::sandbox {

std::unique_ptr<UserKernelLauncher> MakeSandboxLauncher(const Config&, const DeviceManager&) {
  return nullptr;
}

}  // namespace kerneld::server::sandbox
