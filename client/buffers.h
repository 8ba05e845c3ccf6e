// RAII shared buffers for kerneld clients: register once, reference tensors
// by (buffer_id, offset), unregister on destruction.
//
//   SharedMemoryBuffer shm(client, 1 << 20);          // shm_open + mmap + register
//   std::memcpy(shm.data(), host, n);
//   *req.mutable_inputs()["x"] = shm.Tensor(DType::kFloat32, {n / 4}, /*offset=*/0);
//
// CudaIpcBuffer (client cudaMalloc, shared by IPC handle) and ServerBuffer
// (AllocateBuffer: server-owned GPU memory the client opens) exist in CUDA
// builds (KERNELD_WITH_CUDA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client.h"
#include "kerneld/dtype.h"

namespace kerneld::client {

// UnregisterBuffer of `id` at `server`.
grpc::Status UnregisterBuffer(KernelClient& server, const std::string& id);

class SharedBuffer {
 public:
  virtual ~SharedBuffer() = default;
  const std::string& id() const { return id_; }
  uint64_t size() const { return size_; }
  // A wire tensor referencing [offset, offset + nbytes) of this buffer.
  v1::Tensor Tensor(DType dt, const std::vector<int64_t>& shape, uint64_t offset = 0) const;
  // The registration status; every other call is only valid when ok().
  const grpc::Status& status() const { return status_; }
  // Unregisters now (the destructor does it otherwise).
  grpc::Status Unregister();

 protected:
  SharedBuffer(KernelClient& c, uint64_t size) : client_(c), size_(size) {}
  KernelClient& client_;
  std::string id_;
  uint64_t size_;
  grpc::Status status_;
  bool registered_ = false;
};

// POSIX shared memory registered with RegisterSharedMemory.
class SharedMemoryBuffer : public SharedBuffer {
 public:
  SharedMemoryBuffer(KernelClient& c, uint64_t size, uint32_t lease_seconds = 0,
                     const std::string& name = "");
  ~SharedMemoryBuffer() override;
  char* data() const { return static_cast<char*>(map_); }
  const std::string& shm_name() const { return shm_name_; }

 private:
  std::string shm_name_;
  void* map_ = nullptr;
};

#ifdef KERNELD_WITH_CUDA
// Client-allocated device memory shared through a CUDA IPC handle.
class CudaIpcBuffer : public SharedBuffer {
 public:
  // device: CUDA ordinal in this process; the server is told the UUID.
  CudaIpcBuffer(KernelClient& c, int device, uint64_t size, uint32_t lease_seconds = 0,
                const std::string& name = "");
  ~CudaIpcBuffer() override;
  void* data() const { return ptr_; }
  // Registers the same allocation with another server (the echo floor of
  // `kernelctl perf --compare-floor`); *id is its buffer id there.
  grpc::Status RegisterAt(KernelClient& server, const std::string& name, uint32_t lease_seconds,
                          std::string* id) const;

 private:
  void* ptr_ = nullptr;
  int device_;
};

// Server-owned device memory (AllocateBuffer), opened here through its handle.
class ServerBuffer : public SharedBuffer {
 public:
  ServerBuffer(KernelClient& c, int device, uint64_t size, uint32_t lease_seconds = 0,
               const std::string& name = "");
  ~ServerBuffer() override;
  void* data() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  int device_;
};

// "GPU-xxxxxxxx-..." of a CUDA ordinal in this process.
std::string CudaDeviceUuid(int device);
#endif

}  // namespace kerneld::client
