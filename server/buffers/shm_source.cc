#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "buffers/buffer_sources.h"

namespace kerneld::server {

Status OpenSharedMemory(const std::string& shm_name, uint64_t offset, uint64_t size,
                        std::shared_ptr<Region>* out) {
  if (shm_name.size() < 2 || shm_name[0] != '/' || shm_name.find('/', 1) != std::string::npos ||
      shm_name.size() > 255)
    return InvalidArgument("shm_name '" + shm_name +
                           "' is not a POSIX shared-memory name; use one slash then a name, e.g. \"/my-tensors\"");
  if (size == 0) return InvalidArgument("byte_size must be > 0");
  int fd = shm_open(shm_name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return NotFound("shared-memory object '" + shm_name + "' does not exist (shm_open: ENOENT)");
    if (e == EACCES)
      return {StatusCode::kPermissionDenied, "shared-memory object '" + shm_name +
                                                 "': kerneld may not open it read-write (" + std::strerror(e) + ")"};
    return InvalidArgument("shm_open('" + shm_name + "'): " + std::strerror(e));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return Internal("fstat('" + shm_name + "'): " + std::strerror(e));
  }
  const uint64_t object_size = static_cast<uint64_t>(st.st_size);
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, size, &end) || end > object_size) {
    close(fd);
    return InvalidArgument("shared-memory object '" + shm_name + "' has " + std::to_string(object_size) +
                           " bytes; offset " + std::to_string(offset) + " + byte_size " + std::to_string(size) +
                           " does not fit");
  }
  // Map from the page holding `offset` (mmap offsets must be page aligned).
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  const uint64_t map_off = offset / page * page;
  const uint64_t map_len = end - map_off;
  void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(map_off));
  int e = errno;
  close(fd);  // the mapping keeps the object alive
  if (p == MAP_FAILED) return ResourceExhausted("mmap of '" + shm_name + "' failed: " + std::strerror(e));
  auto r = std::make_shared<Region>();
  r->kind = BufferKind::kSharedMemory;
  r->device = Device::Cpu();
  r->device_uuid = "cpu";
  r->base = static_cast<char*>(p) + (offset - map_off);
  r->size = size;
  r->release = [p, map_len] { munmap(p, map_len); };
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace kerneld::server
