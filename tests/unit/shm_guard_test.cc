// The SIGBUS guard of shared-memory regions, in process: a shrunk object is
// refused before use, a fault inside a region is absorbed and flags it, a
// fault anywhere else still kills, and the region table frees its slots.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "buffers/buffer_registry.h"
#include "buffers/buffer_sources.h"

namespace kerneld::server {
namespace {

// A POSIX shared-memory object of `size` bytes, unlinked on destruction.
class ShmObject {
 public:
  explicit ShmObject(off_t size) {
    static int counter = 0;
    name_ = "/kerneld-guard-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    fd_ = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd_ >= 0 && ftruncate(fd_, size) != 0) fd_ = -1;
  }
  ~ShmObject() {
    if (fd_ >= 0) close(fd_);
    shm_unlink(name_.c_str());
  }
  bool ok() const { return fd_ >= 0; }
  bool Resize(off_t size) { return ftruncate(fd_, size) == 0; }
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int fd_ = -1;
};

TEST(ShmGuard, ShrunkObjectRefusedThenFaultAbsorbed) {
  ShmObject obj(1 << 16);
  ASSERT_TRUE(obj.ok());
  std::shared_ptr<Region> r;
  ASSERT_TRUE(OpenSharedMemory(obj.name(), 0, 1 << 16, &r).ok());
  ASSERT_TRUE(r->check);
  EXPECT_TRUE(r->check().ok());
  ASSERT_TRUE(obj.Resize(100));
  Status st = r->check();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("shrank to 100 bytes under its registration of 65536"),
            std::string::npos)
      << st.message();
  // What a kernel racing the shrink does: touch pages past the new end.
  EXPECT_FALSE(r->faulted());
  volatile char* p = r->base;
  p[1 << 15] = 7;                  // a write (SIGBUS without the guard)
  EXPECT_EQ(p[(1 << 16) - 1], 0);  // a read: the zero page
  EXPECT_TRUE(r->faulted());
  std::vector<RegionPin> pins;
  pins.emplace_back(r);
  st = CheckPinsAfterUse(pins);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("register it again"), std::string::npos) << st.message();
}

TEST(ShmGuard, RegistryRefusesFaultedAndMisaligned) {
  ShmObject obj(8192);
  ASSERT_TRUE(obj.ok());
  BufferRegistry reg(/*start_reaper=*/false);
  std::shared_ptr<Region> r;
  ASSERT_TRUE(OpenSharedMemory(obj.name(), 1, 4096, &r).ok());  // an odd base
  r->owner = kAnonymous;
  const std::string id = reg.Add(r);
  RegionPin pin;
  char* ptr = nullptr;
  Status st = reg.Resolve(kAnonymous, id, 0, 16, DType::kFloat32, &pin, &ptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  for (const char* frag : {"offset 0", "float32", "alignment 4 bytes", "starts 1 bytes past"})
    EXPECT_NE(st.message().find(frag), std::string::npos) << frag << " in " << st.message();
  EXPECT_EQ(pin.region(), nullptr);
  EXPECT_TRUE(reg.Resolve(kAnonymous, id, 3, 16, DType::kFloat32, &pin, &ptr).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 4, 0u);
  EXPECT_TRUE(reg.Resolve(kAnonymous, id, 0, 16, DType::kUInt8, &pin, &ptr).ok());
  pin.Reset();
  r->fault_flag.store(true);
  st = reg.Resolve(kAnonymous, id, 3, 16, DType::kFloat32, &pin, &ptr);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.message();
}

#if defined(__SANITIZE_ADDRESS__)
#define KERNELD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KERNELD_TEST_ASAN 1
#endif
#endif

// A fault the guard does not own goes to the handler before it: the default
// (death by SIGBUS) or, in a sanitized build, ASan's, which reports
// "BUS" and exits 1. Either way the process does not go on.
bool DiedOfForeignBus(int status) {
#ifdef KERNELD_TEST_ASAN
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1) return true;
#endif
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
}

// The guard only absorbs faults inside registered regions.
TEST(ShmGuardDeathTest, OtherFaultsStillKill) {
  ShmObject registered(4096);
  ASSERT_TRUE(registered.ok());
  std::shared_ptr<Region> r;
  ASSERT_TRUE(OpenSharedMemory(registered.name(), 0, 4096, &r).ok());  // handler installed
  ShmObject other(1 << 16);
  ASSERT_TRUE(other.ok());
  EXPECT_EXIT(
      {
        void* m = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, other.fd(), 0);
        if (m == MAP_FAILED || !other.Resize(0)) _exit(3);
        static_cast<volatile char*>(m)[4096] = 1;
        _exit(0);
      },
      DiedOfForeignBus, "");
  EXPECT_EXIT(
      {
        kill(getpid(), SIGBUS);
        _exit(0);
      },
      DiedOfForeignBus, "");
}

// Slots are freed on release; a full table answers RESOURCE_EXHAUSTED.
TEST(ShmGuard, TableFreesSlotsAndReportsFull) {
  ShmObject obj(4096);
  ASSERT_TRUE(obj.ok());
  for (int i = 0; i < 5000; ++i) {
    std::shared_ptr<Region> r;
    ASSERT_TRUE(OpenSharedMemory(obj.name(), 0, 4096, &r).ok()) << i;
  }
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max < 4200) GTEST_SKIP() << "needs 4200 file descriptors";
  const rlimit saved = lim;
  lim.rlim_cur = lim.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  std::vector<std::shared_ptr<Region>> held;
  Status st;
  while (held.size() < 4200) {
    std::shared_ptr<Region> r;
    st = OpenSharedMemory(obj.name(), 0, 4096, &r);
    if (!st.ok()) break;
    held.push_back(std::move(r));
  }
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.message();
  EXPECT_NE(st.message().find("4096 shared-memory regions"), std::string::npos) << st.message();
  EXPECT_EQ(held.size(), 4096u);
  held.clear();
  setrlimit(RLIMIT_NOFILE, &saved);
}

}  // namespace
}  // namespace kerneld::server

namespace kerneld::server {
namespace {

// A name with an embedded NUL would open the object named by its prefix
// (shm_open reads a C string): refused, not silently shortened.
TEST(ShmGuard, NameWithNulIsRefused) {
  ShmObject obj(4096);
  ASSERT_TRUE(obj.ok());
  std::shared_ptr<Region> r;
  Status st = OpenSharedMemory(obj.name() + std::string("\0x", 2), 0, 4096, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("\\x00"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kerneld::server
