#include "buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace kerneld::client {

v1::Tensor SharedBuffer::Tensor(DType dt, const std::vector<int64_t>& shape,
                                uint64_t offset) const {
  v1::Tensor t;
  t.set_dtype(static_cast<v1::DType>(static_cast<int>(dt)));
  for (int64_t d : shape) t.add_shape(d);
  t.mutable_buffer()->set_buffer_id(id_);
  t.mutable_buffer()->set_offset(offset);
  return t;
}

grpc::Status UnregisterBuffer(KernelClient& server, const std::string& id) {
  auto stub = v1::BufferService::NewStub(server.channel());
  grpc::ClientContext ctx;
  v1::UnregisterBufferRequest req;
  req.set_buffer_id(id);
  v1::UnregisterBufferResponse resp;
  return stub->UnregisterBuffer(&ctx, req, &resp);
}

grpc::Status SharedBuffer::Unregister() {
  if (!registered_) return grpc::Status::OK;
  registered_ = false;
  return UnregisterBuffer(client_, id_);
}

SharedMemoryBuffer::SharedMemoryBuffer(KernelClient& c, uint64_t size, uint32_t lease_seconds,
                                       const std::string& name)
    : SharedBuffer(c, size) {
  static std::atomic<int> counter{0};
  shm_name_ = "/kerneld-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  int fd = shm_open(shm_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    status_ =
        grpc::Status(grpc::StatusCode::INTERNAL, "shm_open: " + std::string(std::strerror(errno)));
    return;
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    status_ =
        grpc::Status(grpc::StatusCode::INTERNAL, "ftruncate: " + std::string(std::strerror(errno)));
    close(fd);
    return;
  }
  map_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    status_ = grpc::Status(grpc::StatusCode::INTERNAL, "mmap failed");
    return;
  }
  auto stub = v1::BufferService::NewStub(client_.channel());
  grpc::ClientContext ctx;
  v1::RegisterSharedMemoryRequest req;
  req.set_shm_name(shm_name_);
  req.set_byte_size(size);
  req.set_name(name);
  req.set_lease_seconds(lease_seconds);
  v1::RegisterSharedMemoryResponse resp;
  status_ = stub->RegisterSharedMemory(&ctx, req, &resp);
  if (status_.ok()) {
    id_ = resp.buffer_id();
    registered_ = true;
  }
}

SharedMemoryBuffer::~SharedMemoryBuffer() {
  Unregister();
  if (map_) munmap(map_, size_);
  // The daemon keeps its own mapping until it unregisters; unlinking the
  // name now only stops new openers.
  if (!shm_name_.empty()) shm_unlink(shm_name_.c_str());
}

}  // namespace kerneld::client
