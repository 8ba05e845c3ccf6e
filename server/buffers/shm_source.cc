// POSIX shared memory registered by clients, and the guard that keeps a
// client's truncation of its own object from killing the daemon.
//
// Touching a MAP_SHARED page past the end of its (shrunk) object raises
// SIGBUS. Two defences, as libwayland-server does for wl_shm pools:
//  1. every Resolve fstat()s the object through a kept fd and refuses a
//     region that no longer fits (the common case: a clean error before any
//     access);
//  2. for a shrink that races a running kernel, a process-wide SIGBUS
//     handler finds the faulting address in a lock-free table of mapped
//     regions, maps private zero pages over that region's whole mapping (so
//     the faulting instruction resumes harmlessly) and flags the region;
//     the request fails when it completes (CheckPinsAfterUse) and so does
//     every later one. Faults outside the table go to the previous handler.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>

#include "buffers/buffer_sources.h"

namespace kerneld::server {

namespace {

// ---- The guard table, read by the SIGBUS handler ---------------------------
//
// A fixed array: the handler may not allocate or lock. Each slot is a
// seqlock: writers (Add/Remove, one per slot, by the `used` claim) make `seq`
// odd while they change the fields; the handler skips odd slots and retries
// nothing: a slot being written is never the faulting one, since a region
// is in the table for as long as a request can touch it.
constexpr int kGuardSlots = 4096;

struct GuardSlot {
  std::atomic<bool> used{false};
  std::atomic<uint64_t> seq{0};
  std::atomic<uintptr_t> begin{0}, end{0};  // the whole mapping, page aligned
  std::atomic<std::atomic<bool>*> faulted{nullptr};
};
static_assert(std::atomic<uintptr_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<std::atomic<bool>*>::is_always_lock_free,
              "the SIGBUS handler needs lock-free atomics");

GuardSlot g_slots[kGuardSlots];
std::atomic<int> g_slot_limit{0};  // slots at or past this were never used
struct sigaction g_previous {};    // the SIGBUS action before ours

void WriteSlot(GuardSlot& s, uintptr_t begin, uintptr_t end, std::atomic<bool>* faulted) {
  const uint64_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.begin.store(begin, std::memory_order_relaxed);
  s.end.store(end, std::memory_order_relaxed);
  s.faulted.store(faulted, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

// Returns the slot, or -1 when the table is full.
int AddGuard(void* begin, size_t len, std::atomic<bool>* faulted) {
  for (int i = 0; i < kGuardSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true)) continue;
    const auto b = reinterpret_cast<uintptr_t>(begin);
    WriteSlot(g_slots[i], b, b + len, faulted);
    int limit = g_slot_limit.load();
    while (limit < i + 1 && !g_slot_limit.compare_exchange_weak(limit, i + 1)) {
    }
    return i;
  }
  return -1;
}

// Must run before the mapping is unmapped (its range may then be reused).
void RemoveGuard(int slot) {
  WriteSlot(g_slots[slot], 0, 0, nullptr);
  g_slots[slot].used.store(false, std::memory_order_release);
}

// Async-signal-safe: atomics, mmap and sigaction only.
void OnSigbus(int sig, siginfo_t* info, void* ucontext) {
  const int saved_errno = errno;
  // si_code > 0: raised by the kernel for a fault, not sent by kill().
  if (info != nullptr && info->si_code > 0) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    const int limit = g_slot_limit.load(std::memory_order_acquire);
    for (int i = 0; i < limit; ++i) {
      GuardSlot& s = g_slots[i];
      const uint64_t seq = s.seq.load(std::memory_order_acquire);
      if (seq % 2 != 0) continue;
      const uintptr_t begin = s.begin.load(std::memory_order_relaxed);
      const uintptr_t end = s.end.load(std::memory_order_relaxed);
      std::atomic<bool>* faulted = s.faulted.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s.seq.load(std::memory_order_relaxed) != seq) continue;
      if (addr < begin || addr >= end || faulted == nullptr) continue;
      void* p = mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        faulted->store(true, std::memory_order_release);
        errno = saved_errno;
        return;  // the faulting access retries on the zero pages
      }
      break;  // could not patch it: die as we would have
    }
  }
  // Not ours: hand it to whoever had SIGBUS before us.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ucontext);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    // The default action (terminate with a core dump): restore it; a fault
    // re-executes the instruction and dies, a kill()ed signal is re-raised.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, nullptr);
    if (info == nullptr || info->si_code <= 0) raise(SIGBUS);
  }
  errno = saved_errno;
}

// Installs OnSigbus once per process; false (with errno) if sigaction fails.
bool InstallSigbusHandler() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ok = sigaction(SIGBUS, &sa, &g_previous) == 0;
  });
  return ok;
}

Status OpenError(const std::string& shm_name, int e) {
  if (e == ENOENT)
    return NotFound("shared-memory object " + Quote(shm_name) +
                    " does not exist (shm_open: ENOENT)");
  if (e == EACCES)
    return {StatusCode::kPermissionDenied, "shared-memory object " + Quote(shm_name) +
                                               ": kerneld may not open it read-write (" +
                                               std::strerror(e) + ")"};
  if (e == EMFILE || e == ENFILE)
    return ResourceExhausted(
        "shm_open(" + Quote(shm_name) + "): " + std::strerror(e) +
        " (kerneld keeps one descriptor per registered object; unregister some)");
  return InvalidArgument("shm_open(" + Quote(shm_name) + "): " + std::strerror(e));
}

}  // namespace

Status CheckSharedMemoryRequest(const std::string& shm_name, uint64_t size) {
  if (shm_name.size() < 2 || shm_name[0] != '/' || shm_name.find('/', 1) != std::string::npos ||
      shm_name.find('\0') != std::string::npos || shm_name.size() > 255)
    return InvalidArgument("shm_name " + Quote(shm_name) +
                           " is not a POSIX shared-memory name; use one slash then a name (no "
                           "NUL), e.g. \"/my-tensors\"");
  if (size == 0) return InvalidArgument("byte_size must be > 0");
  return Status::Ok();
}

Status OpenSharedMemory(const std::string& shm_name, uint64_t offset, uint64_t size,
                        std::shared_ptr<Region>* out) {
  return OpenSharedMemory(shm_name, offset, size, nullptr, out);
}

Status OpenSharedMemory(const std::string& shm_name, uint64_t offset, uint64_t size,
                        const ShmAccessCheck& may_open, std::shared_ptr<Region>* out) {
  KERNELD_RETURN_IF_ERROR(CheckSharedMemoryRequest(shm_name, size));
  if (!InstallSigbusHandler())
    return Internal(std::string("sigaction(SIGBUS): ") + std::strerror(errno));
  // Whatever a local user made in /dev/shm may be named here: O_NONBLOCK so
  // no open can wait (a FIFO, a device node), and only a regular file is
  // mapped (glibc adds O_NOFOLLOW: no symlinks either).
  const int fd = shm_open(shm_name.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK, 0);
  if (fd < 0) return OpenError(shm_name, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return Internal("fstat(" + Quote(shm_name) + "): " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgument("shared-memory object " + Quote(shm_name) +
                           " is not a regular file (a FIFO, device or socket); kerneld maps "
                           "only objects made with shm_open");
  }
  if (may_open) {
    if (std::string why = may_open(st); !why.empty()) {
      close(fd);
      return {StatusCode::kPermissionDenied, "shared-memory object " + Quote(shm_name) + ": " +
                                                 why +
                                                 ", so kerneld will not open it on its behalf"};
    }
  }
  const uint64_t object_size = static_cast<uint64_t>(st.st_size);
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, size, &end) || end > object_size) {
    close(fd);
    return InvalidArgument("shared-memory object " + Quote(shm_name) + " has " +
                           std::to_string(object_size) + " bytes; offset " +
                           std::to_string(offset) + " + byte_size " + std::to_string(size) +
                           " does not fit");
  }
  // Map from the page holding `offset` (mmap offsets must be page aligned).
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  const uint64_t map_off = offset / page * page;
  const uint64_t map_len = end - map_off;
  void* p =
      mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(map_off));
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return ResourceExhausted("mmap of " + Quote(shm_name) + " failed: " + std::strerror(e));
  }
  auto r = std::make_shared<Region>();
  const int slot = AddGuard(p, map_len, &r->fault_flag);
  if (slot < 0) {
    munmap(p, map_len);
    close(fd);
    return ResourceExhausted(
        "kerneld already maps " + std::to_string(kGuardSlots) +
        " shared-memory regions, its limit; unregister some before registering " + Quote(shm_name));
  }
  r->kind = BufferKind::kSharedMemory;
  r->device = Device::Cpu();
  r->device_uuid = "cpu";
  r->base = static_cast<char*>(p) + (offset - map_off);
  r->size = size;
  // The fd stays open so that every use can fstat the object, even after the
  // client unlinked its name. (An unlinked object is still valid memory.)
  r->check = [fd, shm_name, offset, size, end]() -> Status {
    struct stat now {};
    if (fstat(fd, &now) != 0)
      return Internal("fstat(" + Quote(shm_name) + "): " + std::strerror(errno));
    const auto have = static_cast<uint64_t>(now.st_size);
    if (have >= end) return Status::Ok();
    return FailedPrecondition("shared-memory object " + Quote(shm_name) + " shrank to " +
                              std::to_string(have) + " bytes under its registration of " +
                              std::to_string(end) + " bytes (offset " + std::to_string(offset) +
                              " + byte_size " + std::to_string(size) + "); re-register it");
  };
  r->release = [slot, p, map_len, fd] {
    RemoveGuard(slot);  // before munmap: the range may be reused at once
    munmap(p, map_len);
    close(fd);
  };
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace kerneld::server
