// shm_register_fuzz: OpenSharedMemory(name, offset, size) with fuzzed names,
// offsets and sizes against small real POSIX shared-memory objects this
// harness creates (8292 bytes: two pages and a tail; one page; empty), and
// against names that do not exist.
//
// Checked: a registration succeeds exactly when offset + size (no overflow)
// lies inside the object and size > 0; the region is `size` bytes whose
// first byte is the object's byte `offset` (each object byte holds a
// pattern of its own index); its first and last bytes are readable and
// writable; the mapping is released with the region. Only this harness's
// own objects are written: a fuzzed name that happens to name someone
// else's object is opened and released, never touched.
#include <fcntl.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "buffers/buffer_sources.h"

namespace {

struct Object {
  std::string name;
  uint64_t size;
};

Object objects[3];

uint8_t Pattern(uint64_t i) { return static_cast<uint8_t>((i * 131) ^ (i >> 8)); }

void Unlink() {
  for (const auto& o : objects) shm_unlink(o.name.c_str());
}

void Create() {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  const uint64_t sizes[3] = {2 * page + 100, page, 0};
  const char* tags[3] = {"a", "b", "empty"};
  for (int i = 0; i < 3; ++i) {
    objects[i] = {"/kerneld-fuzz-" + std::to_string(getpid()) + "-" + tags[i], sizes[i]};
    int fd = shm_open(objects[i].name.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(sizes[i])) != 0) std::abort();
    for (uint64_t k = 0; k < sizes[i]; ++k) {
      uint8_t b = Pattern(k);
      if (pwrite(fd, &b, 1, static_cast<off_t>(k)) != 1) std::abort();
    }
    close(fd);
  }
  std::atexit(Unlink);
}

uint64_t PickU64(FuzzedDataProvider& in, uint64_t object_size) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0:
      return 0;
    case 1:
      return object_size + in.ConsumeIntegralInRange<uint64_t>(0, 2) - 1;  // around the end
    case 2:
      return in.ConsumeIntegralInRange<uint64_t>(0, object_size + 1);
    case 3:
      return page * in.ConsumeIntegralInRange<uint64_t>(0, 3) +
             in.ConsumeIntegralInRange<uint64_t>(0, 2) - 1;
    case 4:
      return ~uint64_t{0} - in.ConsumeIntegralInRange<uint64_t>(0, 2 * page);
    case 5:
      return uint64_t{1} << in.ConsumeIntegralInRange<int>(0, 63);
    default:
      return in.ConsumeIntegral<uint64_t>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool created = (Create(), true);
  (void)created;
  FuzzedDataProvider in(data, size);
  const int which = in.ConsumeIntegralInRange<int>(0, 5);
  std::string name;
  const Object* obj = nullptr;
  switch (which) {
    case 0:
    case 1:
    case 2:
      obj = &objects[which];
      name = obj->name;
      break;
    case 3:
      name = objects[0].name + in.ConsumeRandomLengthString(8);
      break;  // a near miss (or a NUL)
    case 4:
      name = "/kerneld-fuzz-none-" + in.ConsumeRandomLengthString(300);
      break;
    default:
      name = in.ConsumeRandomLengthString(300);
      break;  // anything at all
  }
  const uint64_t object_size = obj ? obj->size : objects[0].size;
  const uint64_t offset = PickU64(in, object_size);
  const uint64_t nbytes = PickU64(in, object_size);

  std::shared_ptr<kerneld::server::Region> region;
  kerneld::Status st = kerneld::server::OpenSharedMemory(name, offset, nbytes, &region);
  if (!st.ok()) {
    if (region != nullptr || st.message().empty()) __builtin_trap();
    if (obj != nullptr) {
      const unsigned __int128 end = static_cast<unsigned __int128>(offset) + nbytes;
      // One of ours, in bounds: only mmap may refuse (address space).
      if (nbytes > 0 && end <= obj->size && st.code() != kerneld::StatusCode::kResourceExhausted)
        __builtin_trap();
    }
    return 0;
  }
  if (region == nullptr || region->base == nullptr || region->size != nbytes) __builtin_trap();
  if (obj != nullptr) {
    const unsigned __int128 end = static_cast<unsigned __int128>(offset) + nbytes;
    if (nbytes == 0 || end > obj->size) __builtin_trap();  // accepted out of bounds
  }
  // Which object did it open? The name as the kernel saw it (up to a NUL).
  const Object* opened = nullptr;
  for (const auto& o : objects)
    if (std::strcmp(name.c_str(), o.name.c_str()) == 0) opened = &o;
  if (opened != nullptr) {
    const unsigned __int128 end = static_cast<unsigned __int128>(offset) + nbytes;
    if (end > opened->size) __builtin_trap();
    volatile uint8_t* p = reinterpret_cast<volatile uint8_t*>(region->base);
    if (p[0] != Pattern(offset) || p[nbytes - 1] != Pattern(offset + nbytes - 1)) __builtin_trap();
    p[0] = Pattern(offset);  // writable (and unchanged for the next run)
    p[nbytes - 1] = Pattern(offset + nbytes - 1);
  }
  region.reset();  // munmap
  return 0;
}
