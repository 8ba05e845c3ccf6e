// echo_floor_kernel.h without CUDA: --kernel is refused at startup.
#include "echo_floor_kernel.h"

namespace kerneld::bench {

std::string FloorKernelInit() { return "--kernel needs a CUDA build (KERNELD_WITH_CUDA)"; }

bool FloorKernelScale(std::string*, bool, float) { return false; }

std::string FloorOpenIpc(const std::string&, uint64_t, std::string*) {
  return "CUDA IPC buffers need a CUDA build of the floor";
}

bool FloorCloseIpc(const std::string&) { return false; }

std::string FloorKernelScaleBuffers(const std::string&, uint64_t, const std::string&, uint64_t,
                                    int64_t, int, float) {
  return "the floor's kernel needs a CUDA build";
}

}  // namespace kerneld::bench
