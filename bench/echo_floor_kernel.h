// The optional kernel of the echo floor server (--kernel): the same work as
// kerneld's `scale` on the GPU, with nothing of kerneld around it. Built
// from echo_floor_kernel.cu with CUDA, else from echo_floor_kernel_none.cc,
// so the server itself carries no #ifdef.
#pragma once

#include <string>

namespace kerneld::bench {

// "" when FloorKernelScale can run here, else why not.
std::string FloorKernelInit();

// bytes = bytes * factor, on the device: copy in, launch, synchronize, copy
// out. Float32 data is scaled; other dtypes (float32 == false) only make the
// round trip. False on a CUDA error.
bool FloorKernelScale(std::string* bytes, bool float32, float factor);

}  // namespace kerneld::bench
