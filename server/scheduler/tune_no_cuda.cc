// TimeOnCuda for builds without CUDA (KERNELD_CUDA=OFF).
#include "scheduler/tune_timing.h"

namespace kerneld::server {

Status TimeOnCuda(const DeviceInfo& gpu, const TuneProblemSpec&, TuneTiming*) {
  return FailedPrecondition(gpu.device.ToString() +
                            ": this kerneld was built without CUDA support (KERNELD_CUDA=OFF)");
}

}  // namespace kerneld::server
