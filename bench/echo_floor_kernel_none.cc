// echo_floor_kernel.h without CUDA: --kernel is refused at startup.
#include "echo_floor_kernel.h"

namespace kerneld::bench {

std::string FloorKernelInit() { return "--kernel needs a CUDA build (KERNELD_WITH_CUDA)"; }

bool FloorKernelScale(std::string*, bool, float) { return false; }

}  // namespace kerneld::bench
