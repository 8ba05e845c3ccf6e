// The optional kernel of the echo floor server (--kernel): the same work as
// kerneld's `scale` on the GPU, with nothing of kerneld around it. Built
// from echo_floor_kernel.cu with CUDA, else from echo_floor_kernel_none.cc,
// so the server itself carries no #ifdef.
#pragma once

#include <cstdint>
#include <string>

namespace kerneld::bench {

// "" when FloorKernelScale can run here, else why not.
std::string FloorKernelInit();

// bytes = bytes * factor, on the device: copy in, launch, synchronize, copy
// out. Float32 data is scaled; other dtypes (float32 == false) only make the
// round trip. False on a CUDA error.
bool FloorKernelScale(std::string* bytes, bool float32, float factor);

// A client's cudaMalloc allocation, opened from its 64-byte IPC handle (the
// request of RegisterCudaIpcBuffer), so `kernelctl perf --via ipc
// --compare-floor` runs the floor's kernel on the same memory as kerneld's.
// "" and *id on success, else why not.
std::string FloorOpenIpc(const std::string& handle, uint64_t byte_size, std::string* id);
bool FloorCloseIpc(const std::string& id);

// y[0, n) = x[0, n) * factor on the registered buffers (ids and byte
// offsets; y may be x), launched on this thread's stream and synchronized:
// what kerneld does for `scale` on a registered buffer. dtype is the
// proto's: 1 float16, 2 bfloat16, 3 float32. "" on success, else why not.
std::string FloorKernelScaleBuffers(const std::string& x_id, uint64_t x_off,
                                    const std::string& y_id, uint64_t y_off, int64_t n, int dtype,
                                    float factor);

}  // namespace kerneld::bench
