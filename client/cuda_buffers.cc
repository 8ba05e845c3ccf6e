// CUDA shared buffers for clients (CUDA builds only).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "buffers.h"

namespace kerneld::client {

std::string CudaDeviceUuid(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "";
  const auto* b = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

CudaIpcBuffer::CudaIpcBuffer(KernelClient& c, int device, uint64_t size, uint32_t lease_seconds,
                             const std::string& name)
    : SharedBuffer(c, size), device_(device) {
  cudaSetDevice(device);
  if (cudaError_t e = cudaMalloc(&ptr_, size); e != cudaSuccess) {
    ptr_ = nullptr;
    status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           std::string("cudaMalloc: ") + cudaGetErrorString(e));
    return;
  }
  status_ = RegisterAt(c, name, lease_seconds, &id_);
  registered_ = status_.ok();
}

grpc::Status CudaIpcBuffer::RegisterAt(KernelClient& server, const std::string& name,
                                       uint32_t lease_seconds, std::string* id) const {
  cudaIpcMemHandle_t h;
  if (cudaError_t e = cudaIpcGetMemHandle(&h, ptr_); e != cudaSuccess)
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        std::string("cudaIpcGetMemHandle: ") + cudaGetErrorString(e));
  auto stub = v1::BufferService::NewStub(server.channel());
  grpc::ClientContext ctx;
  v1::RegisterCudaIpcBufferRequest req;
  req.set_ipc_handle(std::string(reinterpret_cast<const char*>(&h), sizeof h));
  req.set_device_uuid(CudaDeviceUuid(device_));
  req.set_byte_size(size_);
  req.set_name(name);
  req.set_lease_seconds(lease_seconds);
  v1::RegisterCudaIpcBufferResponse resp;
  grpc::Status st = stub->RegisterCudaIpcBuffer(&ctx, req, &resp);
  if (st.ok()) *id = resp.buffer_id();
  return st;
}

CudaIpcBuffer::~CudaIpcBuffer() {
  Unregister();  // the daemon closes its mapping (or defers until its requests finish)
  if (ptr_) {
    cudaSetDevice(device_);
    cudaFree(ptr_);
  }
}

ServerBuffer::ServerBuffer(KernelClient& c, int device, uint64_t size, uint32_t lease_seconds,
                           const std::string& name)
    : SharedBuffer(c, size), device_(device) {
  auto stub = v1::BufferService::NewStub(client_.channel());
  grpc::ClientContext ctx;
  v1::AllocateBufferRequest req;
  req.set_device(CudaDeviceUuid(device));
  req.set_byte_size(size);
  req.set_name(name);
  req.set_lease_seconds(lease_seconds);
  v1::AllocateBufferResponse resp;
  status_ = stub->AllocateBuffer(&ctx, req, &resp);
  if (!status_.ok()) return;
  id_ = resp.buffer_id();
  registered_ = true;
  cudaSetDevice(device);
  cudaIpcMemHandle_t h;
  std::memcpy(&h, resp.ipc_handle().data(), sizeof h);
  if (cudaError_t e = cudaIpcOpenMemHandle(&ptr_, h, cudaIpcMemLazyEnablePeerAccess);
      e != cudaSuccess) {
    ptr_ = nullptr;
    status_ = grpc::Status(grpc::StatusCode::INTERNAL,
                           std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e));
  }
}

ServerBuffer::~ServerBuffer() {
  if (ptr_) {
    cudaSetDevice(device_);
    cudaIpcCloseMemHandle(ptr_);
  }
  Unregister();
}

}  // namespace kerneld::client
