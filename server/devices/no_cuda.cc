// DiscoverCudaDevices for builds without CUDA (KERNELD_CUDA=OFF).
#include "devices/device_manager.h"

namespace kerneld::server {

void DiscoverCudaDevices(const Config&, std::vector<std::unique_ptr<DeviceWorker>>*,
                         CudaVersions* versions) {
  versions->status = "this kerneld was built without CUDA support (KERNELD_CUDA=OFF)";
}

}  // namespace kerneld::server
