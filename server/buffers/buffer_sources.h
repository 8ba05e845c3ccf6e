// Opening and allocating the memory behind registered buffers.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <memory>
#include <string>

#include "buffers/region.h"
#include "kerneld/status.h"

namespace kerneld::server {

// The request's own checks, before any filesystem work (cheap refusal
// first): a POSIX shared-memory name ("/name": one slash, no NUL, at most 255
// bytes) and a size > 0. OK, or INVALID_ARGUMENT saying what is wrong.
Status CheckSharedMemoryRequest(const std::string& shm_name, uint64_t size);

// POSIX shared memory: shm_open + fstat + mmap of [offset, offset+size).
// Only a regular file is mapped, and the open never waits (O_NONBLOCK).
Status OpenSharedMemory(const std::string& shm_name, uint64_t offset, uint64_t size,
                        std::shared_ptr<Region>* out);

// Whose rights bound an open (no confused deputy): the object is used only
// if `may_open` (given the object's fstat) returns "", else PERMISSION_DENIED
// with its reason. The check runs on the descriptor kerneld opened, so the
// name cannot be swapped between check and use.
using ShmAccessCheck = std::function<std::string(const struct stat&)>;
Status OpenSharedMemory(const std::string& shm_name, uint64_t offset, uint64_t size,
                        const ShmAccessCheck& may_open, std::shared_ptr<Region>* out);

// A client's cudaMalloc allocation shared by a 64-byte cudaIpcMemHandle_t.
// Checks `size` against the real allocation (cuMemGetAddressRange).
Status OpenCudaIpc(const std::string& handle, const DeviceInfo& dev, uint64_t size,
                   std::shared_ptr<Region>* out);

// Server-owned device memory, exported as an IPC handle for the client.
Status AllocateCuda(const DeviceInfo& dev, uint64_t size, std::shared_ptr<Region>* out,
                    std::string* ipc_handle);

// Free/total memory of a device (for tests and metrics); false without CUDA.
bool CudaMemInfo(int device, uint64_t* free_bytes, uint64_t* total_bytes);

}  // namespace kerneld::server
