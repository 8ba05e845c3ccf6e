// A client's shared memory can fail its own requests, never the daemon:
// truncating a registered object (before a request, or while its kernel
// runs) gives a clear status and the daemon keeps serving; misaligned
// references are refused. Every test ends by checking the daemon serves.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>

#include "buffers.h"
#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

using client::SharedMemoryBuffer;

class ShmTruncateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon({"--enable_test_ops"}); }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();  // it exited cleanly: no SIGBUS
    delete daemon_;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }
  void TearDown() override {
    v1::ExecuteResponse resp;
    grpc::Status st = c().Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &resp);
    EXPECT_TRUE(st.ok()) << st.error_message() << "\n" << daemon_->Log();
  }
  // The unix socket: shared memory needs a caller whose uid is known.
  client::KernelClient& c() { return daemon_->unix_client(); }
  static Daemon* daemon_;
};
Daemon* ShmTruncateTest::daemon_ = nullptr;

// Sets the size of the object named `name` (the client's own object).
void Resize(const std::string& name, off_t size) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(ftruncate(fd, size), 0);
  close(fd);
}

grpc::Status Scale(client::KernelClient& c, const v1::Tensor& x, const v1::Tensor* y = nullptr) {
  v1::ExecuteRequest req;
  req.set_op("scale");
  req.set_backend("cpu");
  (*req.mutable_inputs())["x"] = x;
  if (y != nullptr) (*req.mutable_outputs())["y"] = *y;
  (*req.mutable_attrs())["factor"].set_f(2.0);
  v1::ExecuteResponse resp;
  return c.Execute(req, &resp);
}

v1::Tensor Inline(int64_t n) {
  std::mt19937_64 rng(5);
  v1::Tensor t;
  client::ToProto(client::Random(DType::kFloat32, {n}, rng), &t);
  return t;
}

bool Has(const grpc::Status& st, const std::string& frag) {
  return st.error_message().find(frag) != std::string::npos;
}

TEST_F(ShmTruncateTest, ShrunkObjectFailsReadsAndWrites) {
  SharedMemoryBuffer shm(c(), 1 << 16);
  ASSERT_TRUE(shm.status().ok()) << shm.status().error_message();
  Resize(shm.shm_name(), 100);  // the client must not touch shm.data() now either
  const v1::Tensor x = shm.Tensor(DType::kFloat32, {4096}, 0);
  grpc::Status st = Scale(c(), x);  // reads the buffer
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(Has(st, "shrank to 100 bytes under its registration of 65536 bytes"))
      << st.error_message();
  EXPECT_TRUE(Has(st, "re-register")) << st.error_message();
  const v1::Tensor y = shm.Tensor(DType::kFloat32, {4096}, 0);
  st = Scale(c(), Inline(4096), &y);  // writes the buffer
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  // Grown back, it is usable again: nothing touched it while it was short.
  Resize(shm.shm_name(), 1 << 16);
  st = Scale(c(), x);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(ShmTruncateTest, UnlinkedThenTruncatedObjectFails) {
  SharedMemoryBuffer shm(c(), 1 << 16);
  ASSERT_TRUE(shm.status().ok());
  int fd = shm_open(shm.shm_name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(shm_unlink(shm.shm_name().c_str()), 0);
  // Unlinked but whole: still valid memory, still served.
  grpc::Status st = Scale(c(), shm.Tensor(DType::kFloat32, {16}, 0));
  EXPECT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  st = Scale(c(), shm.Tensor(DType::kFloat32, {16}, 0));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(Has(st, "shrank to 0 bytes")) << st.error_message();
}

// The backstop: the object shrinks while the kernel sleeps, and its copy
// then touches pages past the end (SIGBUS without the guard).
TEST_F(ShmTruncateTest, ShrunkDuringKernelFailsAndStaysFailed) {
  SharedMemoryBuffer shm(c(), 1 << 20);
  ASSERT_TRUE(shm.status().ok());
  v1::ExecuteRequest req;
  req.set_op("_test_sleep");
  req.set_backend("cpu");
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {65536}, 0);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {65536}, 1 << 19);
  (*req.mutable_attrs())["ms"].set_f(400);
  auto fut = std::async(std::launch::async, [&] {
    v1::ExecuteResponse resp;
    return c().Execute(req, &resp);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  Resize(shm.shm_name(), 0);
  grpc::Status st = fut.get();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(Has(st, "faulted")) << st.error_message();
  // Grown back, it still refuses: its mapping is no longer the object.
  Resize(shm.shm_name(), 1 << 20);
  st = Scale(c(), shm.Tensor(DType::kFloat32, {16}, 0));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(Has(st, "register it again")) << st.error_message();
  EXPECT_TRUE(shm.Unregister().ok());  // and it unregisters normally
}

// Registers `name`'s bytes [0, size); "" when it does not fit (now).
std::string Register(client::KernelClient& c, const std::string& name, uint64_t size) {
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::RegisterSharedMemoryRequest req;
  req.set_shm_name(name);
  req.set_byte_size(size);
  v1::RegisterSharedMemoryResponse resp;
  return stub->RegisterSharedMemory(&ctx, req, &resp).ok() ? resp.buffer_id() : "";
}

void Unregister(client::KernelClient& c, const std::string& id) {
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::UnregisterBufferRequest req;
  req.set_buffer_id(id);
  v1::UnregisterBufferResponse resp;
  EXPECT_TRUE(stub->UnregisterBuffer(&ctx, req, &resp).ok());
}

// Truncation racing running kernels: every answer is OK or the clear error,
// and the daemon survives. A faulted region stays failed, so each client
// registers a fresh one after a fault (which races the shrinker too).
TEST_F(ShmTruncateTest, TruncationRacingKernels) {
  constexpr int64_t kN = 4 << 20;  // 16 MiB of float32
  constexpr off_t kBytes = kN * 4;
  SharedMemoryBuffer shm(c(), kBytes);
  ASSERT_TRUE(shm.status().ok());
  std::atomic<bool> stop{false};
  std::thread shrinker([&] {
    int fd = shm_open(shm.shm_name().c_str(), O_RDWR, 0);
    if (fd < 0) return;
    for (int i = 0; !stop.load(); ++i) {  // mostly whole, briefly short
      if (ftruncate(fd, 4096) != 0 || ftruncate(fd, kBytes) != 0) break;
      std::this_thread::sleep_for(std::chrono::microseconds(2000 + 1000 * (i % 7)));
    }
    close(fd);
  });
  std::atomic<int> ok{0}, shrank{0}, faulted{0};
  auto client_loop = [&] {
    std::string id;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
      if (id.empty() && (id = Register(c(), shm.shm_name(), kBytes)).empty())
        continue;  // short now
      v1::Tensor x = shm.Tensor(DType::kFloat32, {kN}, 0);
      x.mutable_buffer()->set_buffer_id(id);
      grpc::Status st = Scale(c(), x, &x);  // in place: reads and writes the buffer
      if (st.ok()) {
        ++ok;
      } else if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION && Has(st, "faulted")) {
        ++faulted;
        Unregister(c(), id);
        id.clear();
      } else if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION && Has(st, "shrank to")) {
        ++shrank;
      } else {
        ADD_FAILURE() << st.error_code() << ": " << st.error_message();
      }
    }
    if (!id.empty()) Unregister(c(), id);
  };
  std::thread a(client_loop), b(client_loop);
  a.join();
  b.join();
  stop = true;
  shrinker.join();
  std::printf("ok %d, shrank %d, faulted %d\n", ok.load(), shrank.load(), faulted.load());
  EXPECT_GT(ok + shrank + faulted, 0);
  EXPECT_TRUE(daemon_->Serving());
}

TEST_F(ShmTruncateTest, MisalignedReferenceRefused) {
  SharedMemoryBuffer shm(c(), 4096);
  ASSERT_TRUE(shm.status().ok());
  // The same object registered again from byte 1: the region's base is odd.
  auto stub = v1::BufferService::NewStub(c().channel());
  grpc::ClientContext ctx;
  v1::RegisterSharedMemoryRequest rr;
  rr.set_shm_name(shm.shm_name());
  rr.set_offset(1);
  rr.set_byte_size(1024);
  v1::RegisterSharedMemoryResponse rresp;
  ASSERT_TRUE(stub->RegisterSharedMemory(&ctx, rr, &rresp).ok());
  v1::Tensor x = shm.Tensor(DType::kFloat32, {16}, 0);
  x.mutable_buffer()->set_buffer_id(rresp.buffer_id());
  grpc::Status st = Scale(c(), x);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  for (const std::string& frag : {"'" + rresp.buffer_id() + "'", std::string("offset 0"),
                                  std::string("float32"), std::string("alignment 4 bytes")})
    EXPECT_TRUE(Has(st, frag)) << frag << " in: " << st.error_message();
  // As an output, too.
  st = Scale(c(), Inline(16), &x);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  // Offset 3 of a region at byte 1 is byte 4 of the object: aligned, served.
  std::vector<float> v(16, 1.5f);
  std::memcpy(shm.data() + 4, v.data(), 64);
  x.mutable_buffer()->set_offset(3);
  st = Scale(c(), x, &x);
  ASSERT_TRUE(st.ok()) << st.error_message();
  float got = 0;
  std::memcpy(&got, shm.data() + 4 + 60, 4);
  EXPECT_EQ(got, 3.0f);
  grpc::ClientContext uctx;
  v1::UnregisterBufferRequest ur;
  ur.set_buffer_id(rresp.buffer_id());
  v1::UnregisterBufferResponse uresp;
  EXPECT_TRUE(stub->UnregisterBuffer(&uctx, ur, &uresp).ok());
}

TEST_F(ShmTruncateTest, LongClientStringsAreCut) {
  SharedMemoryBuffer shm(c(), 4096);
  ASSERT_TRUE(shm.status().ok());
  v1::Tensor x = shm.Tensor(DType::kFloat32, {4}, 0);
  x.mutable_buffer()->set_buffer_id(std::string(1000, 'b'));
  grpc::Status st = Scale(c(), x);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Has(st, "'" + std::string(128, 'b') + "…'")) << st.error_message();
  EXPECT_FALSE(Has(st, std::string(129, 'b')));
}

}  // namespace
}  // namespace kerneld::testing
