// CUDA IPC and server-allocated buffers (CUDA builds).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstring>

#include "buffers/buffer_sources.h"

namespace kerneld::server {

namespace {

std::string Err(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// cuMemGetAddressRange through the runtime's driver entry point, so the
// binary does not link libcuda (it must start where no driver exists).
PFN_cuMemGetAddressRange_v3020 AddressRangeFn() {
  static PFN_cuMemGetAddressRange_v3020 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<PFN_cuMemGetAddressRange_v3020>(nullptr);
    }
    return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(p);
  }();
  return fn;
}

}  // namespace

Status OpenCudaIpc(const std::string& handle, const DeviceInfo& dev, uint64_t size, std::shared_ptr<Region>* out) {
  if (handle.size() != sizeof(cudaIpcMemHandle_t))
    return InvalidArgument("ipc_handle has " + std::to_string(handle.size()) + " bytes; a cudaIpcMemHandle_t has " +
                           std::to_string(sizeof(cudaIpcMemHandle_t)));
  if (size == 0) return InvalidArgument("byte_size must be > 0");
  if (cudaError_t e = cudaSetDevice(dev.device.index); e != cudaSuccess)
    return Internal("cudaSetDevice(" + std::to_string(dev.device.index) + "): " + Err(e));
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  if (cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    return InvalidArgument("cudaIpcOpenMemHandle rejected the handle: " + Err(e) +
                           " (was it exported by another live process with cudaIpcGetMemHandle on the base of a "
                           "cudaMalloc allocation, on device " + dev.uuid + "?)");
  }
  const int index = dev.device.index;
  auto close = [p, index] {
    cudaSetDevice(index);
    cudaIpcCloseMemHandle(p);
  };
  auto fn = AddressRangeFn();
  if (fn == nullptr) {
    close();
    return Internal("cuMemGetAddressRange is not available from the driver");
  }
  CUdeviceptr base = 0;
  size_t alloc = 0;
  if (CUresult r = fn(&base, &alloc, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS) {
    close();
    return Internal("cuMemGetAddressRange failed (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  }
  const uint64_t avail = static_cast<uint64_t>(alloc) - (reinterpret_cast<CUdeviceptr>(p) - base);
  if (size > avail) {
    close();
    return InvalidArgument("byte_size " + std::to_string(size) + " exceeds the shared allocation's " +
                           std::to_string(avail) + " bytes");
  }
  auto r = std::make_shared<Region>();
  r->kind = BufferKind::kCudaIpc;
  r->device = dev.device;
  r->device_uuid = dev.uuid;
  r->base = static_cast<char*>(p);
  r->size = size;
  r->release = close;
  *out = std::move(r);
  return Status::Ok();
}

Status AllocateCuda(const DeviceInfo& dev, uint64_t size, std::shared_ptr<Region>* out, std::string* ipc_handle) {
  if (size == 0) return InvalidArgument("byte_size must be > 0");
  if (cudaError_t e = cudaSetDevice(dev.device.index); e != cudaSuccess)
    return Internal("cudaSetDevice: " + Err(e));
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, size); e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted("cannot allocate " + std::to_string(size) + " bytes on " + dev.device.ToString() +
                             " (" + std::to_string(free_b) + " of " + std::to_string(total_b) + " bytes free): " +
                             Err(e));
  }
  // Zero it: the client must never see another tenant's old data.
  cudaMemset(p, 0, size);
  cudaIpcMemHandle_t h;
  if (cudaError_t e = cudaIpcGetMemHandle(&h, p); e != cudaSuccess) {
    cudaFree(p);
    return Internal("cudaIpcGetMemHandle: " + Err(e));
  }
  cudaDeviceSynchronize();
  ipc_handle->assign(reinterpret_cast<const char*>(&h), sizeof h);
  const int index = dev.device.index;
  auto r = std::make_shared<Region>();
  r->kind = BufferKind::kServerAllocated;
  r->device = dev.device;
  r->device_uuid = dev.uuid;
  r->base = static_cast<char*>(p);
  r->size = size;
  r->release = [p, index] {
    cudaSetDevice(index);
    cudaFree(p);
  };
  *out = std::move(r);
  return Status::Ok();
}

bool CudaMemInfo(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (cudaSetDevice(device) != cudaSuccess) return false;
  size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) return false;
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

}  // namespace kerneld::server
