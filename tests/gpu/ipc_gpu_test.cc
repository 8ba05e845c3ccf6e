// CUDA IPC between two processes: this test (the client) and a real kerneld
// (the server). Client buffers computed in place, server-allocated buffers
// opened by the client, unregister with 100 requests in flight, a SIGKILLed
// client's leased buffers freed after expiry, and 10 000 register/unregister
// cycles without growth in device memory or open handles.
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <future>

#include "kerneld/half.h"
#include "buffers.h"
#include "daemon_fixture.h"
#include "gpu_util.h"
#include "reference.h"

extern char** environ;

namespace kerneld::testing {
namespace {

using client::CudaIpcBuffer;
using client::ServerBuffer;

std::string g_self;  // this binary, for the child process

uint64_t FreeBytes() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  return f;
}

int CountFds(pid_t pid) {
  int n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

void ToDevice(void* base, uint64_t off, const client::HostTensor& t) {
  std::string b = client::Encode(t.dtype, t.values);
  ASSERT_EQ(cudaMemcpy(static_cast<char*>(base) + off, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
}
std::vector<double> FromDevice(const void* base, uint64_t off, DType dt, int64_t n) {
  std::string b(static_cast<size_t>(n) * ItemSize(dt), '\0');
  cudaMemcpy(b.data(), static_cast<const char*>(base) + off, b.size(), cudaMemcpyDeviceToHost);
  std::vector<double> v;
  client::Decode(dt, b, &v);
  return v;
}

class IpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon({"--enable_test_ops", "--log_level=0"}); }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    delete daemon_;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }
  client::KernelClient& c() { return daemon_->client(); }
  int ListCount() {
    auto stub = v1::BufferService::NewStub(c().channel());
    grpc::ClientContext ctx;
    v1::ListBuffersResponse resp;
    stub->ListBuffers(&ctx, {}, &resp);
    return resp.buffers_size();
  }
  static Daemon* daemon_;
};
Daemon* IpcTest::daemon_ = nullptr;

TEST_F(IpcTest, ClientBufferScaleInPlaceAndRmsnorm) {
  CudaIpcBuffer buf(c(), 0, 1 << 22, 0, "ipc-test");
  ASSERT_TRUE(buf.status().ok()) << buf.status().error_message();
  std::mt19937_64 rng(1);
  auto x = client::Random(DType::kBFloat16, {8, 4096}, rng);
  ToDevice(buf.data(), 0, x);
  v1::ExecuteRequest req;
  req.set_op("scale");
  (*req.mutable_inputs())["x"] = buf.Tensor(DType::kBFloat16, {8, 4096}, 0);
  (*req.mutable_outputs())["y"] = buf.Tensor(DType::kBFloat16, {8, 4096}, 0);  // in place
  (*req.mutable_attrs())["factor"].set_f(2.0);
  v1::ExecuteResponse resp;
  grpc::Status st = c().Execute(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.info().device(), "cuda:0");
  auto got = FromDevice(buf.data(), 0, DType::kBFloat16, 8 * 4096);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], x.values[i] * 2) << i;  // exact: *2

  if (!OpRegistry::Global().Find("rmsnorm")) GTEST_SKIP() << "no rmsnorm op in this build";
  auto w = client::Random(DType::kBFloat16, {4096}, rng);
  ToDevice(buf.data(), 1 << 20, w);
  x.values = got;
  v1::ExecuteRequest rn;
  rn.set_op("rmsnorm");
  (*rn.mutable_inputs())["x"] = buf.Tensor(DType::kBFloat16, {8, 4096}, 0);
  (*rn.mutable_inputs())["weight"] = buf.Tensor(DType::kBFloat16, {4096}, 1 << 20);
  (*rn.mutable_outputs())["y"] = buf.Tensor(DType::kBFloat16, {8, 4096}, 2 << 20);
  st = c().Execute(rn, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  client::HostTensors ref;
  std::string err;
  ASSERT_TRUE(client::Reference("rmsnorm", {{"x", x}, {"weight", w}}, {{"eps", 1e-6}, {"weight_bias", 0.0}}, &ref, &err))
      << err;
  auto y = FromDevice(buf.data(), 2 << 20, DType::kBFloat16, 8 * 4096);
  EXPECT_EQ(client::Compare(y, ref["y"].values, 1e-2, 1e-2).mismatches, 0);
}

TEST_F(IpcTest, ServerAllocatedBufferOpenedByClient) {
  ServerBuffer buf(c(), 0, 1 << 20, 0, "server-owned");
  ASSERT_TRUE(buf.status().ok()) << buf.status().error_message();
  // Server memory starts zeroed: no other tenant's data leaks.
  auto zero = FromDevice(buf.data(), 0, DType::kFloat32, 1024);
  for (double v : zero) ASSERT_EQ(v, 0.0);
  std::mt19937_64 rng(2);
  auto x = client::Random(DType::kFloat16, {4097}, rng);
  ToDevice(buf.data(), 0, x);
  v1::ExecuteRequest req;
  req.set_op("scale");
  (*req.mutable_inputs())["x"] = buf.Tensor(DType::kFloat16, {4097}, 0);
  (*req.mutable_outputs())["y"] = buf.Tensor(DType::kFloat16, {4097}, 16384);
  (*req.mutable_attrs())["factor"].set_f(-0.5);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(c().Execute(req, &resp).ok());
  auto y = FromDevice(buf.data(), 16384, DType::kFloat16, 4097);
  // Halving is exact in float32, but small values become float16 subnormals
  // and round: compare with the product rounded once to float16.
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(y[i], HalfToFloat(FloatToHalf(static_cast<float>(x.values[i] * -0.5)))) << i;
}

TEST_F(IpcTest, UnregisterWithHundredInFlight) {
  CudaIpcBuffer buf(c(), 0, 1 << 20);
  ASSERT_TRUE(buf.status().ok());
  std::mt19937_64 rng(3);
  auto x = client::Random(DType::kFloat32, {1024}, rng);
  ToDevice(buf.data(), 0, x);
  auto stream = c().OpenStream();
  for (int i = 0; i < 100; ++i) {
    v1::ExecuteRequest req;
    req.set_op("_test_sleep");  // holds a GPU stream for 20 ms
    req.set_request_id(std::to_string(i));
    (*req.mutable_inputs())["x"] = buf.Tensor(DType::kFloat32, {1024}, 0);
    (*req.mutable_outputs())["y"] = buf.Tensor(DType::kFloat32, {1024}, 8192 + 4096 * (i % 8));
    (*req.mutable_attrs())["ms"].set_f(20);
    ASSERT_TRUE(stream->Send(req));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto stub = v1::BufferService::NewStub(c().channel());
  grpc::ClientContext ctx;
  v1::UnregisterBufferRequest ur;
  ur.set_buffer_id(buf.id());
  v1::UnregisterBufferResponse uresp;
  ASSERT_TRUE(stub->UnregisterBuffer(&ctx, ur, &uresp).ok());
  EXPECT_TRUE(uresp.deferred());
  stream->CloseSend();
  int ok = 0, not_found = 0;
  v1::ExecuteResponse resp;
  while (stream->Receive(&resp)) {
    if (resp.status().code() == 0) ++ok;
    if (resp.status().code() == grpc::StatusCode::NOT_FOUND) ++not_found;
  }
  EXPECT_TRUE(stream->Finish().ok());
  // Requests accepted before the unregister complete; any read after it
  // (the stream window is 64) is told the buffer is gone. None fail otherwise.
  EXPECT_EQ(ok + not_found, 100);
  EXPECT_GE(ok, 64);
  std::printf("[ info ] unregister deferred=%d; %d completed, %d refused after unregister\n", uresp.deferred(), ok,
              not_found);
  EXPECT_EQ(FromDevice(buf.data(), 8192, DType::kFloat32, 1024), x.values);
}

TEST_F(IpcTest, TenThousandRegisterCyclesLeakNothing) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  cudaIpcMemHandle_t h;
  ASSERT_EQ(cudaIpcGetMemHandle(&h, p), cudaSuccess);
  auto stub = v1::BufferService::NewStub(c().channel());
  auto cycle = [&] {
    grpc::ClientContext ctx;
    v1::RegisterCudaIpcBufferRequest req;
    req.set_ipc_handle(std::string(reinterpret_cast<const char*>(&h), sizeof h));
    req.set_device_uuid(client::CudaDeviceUuid(0));
    req.set_byte_size(1 << 20);
    v1::RegisterCudaIpcBufferResponse resp;
    grpc::Status st = stub->RegisterCudaIpcBuffer(&ctx, req, &resp);
    if (!st.ok()) return st;
    grpc::ClientContext ctx2;
    v1::UnregisterBufferRequest ur;
    ur.set_buffer_id(resp.buffer_id());
    v1::UnregisterBufferResponse uresp;
    return stub->UnregisterBuffer(&ctx2, ur, &uresp);
  };
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(cycle().ok());
  const uint64_t free0 = FreeBytes();
  const int fds0 = CountFds(daemon_->pid());
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(cycle().ok()) << i;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t free1 = FreeBytes();
  const int fds1 = CountFds(daemon_->pid());
  std::printf("[ info ] 10000 cycles in %.1f s; device free %+lld bytes; daemon fds %d -> %d\n", secs,
              static_cast<long long>(free1) - static_cast<long long>(free0), fds0, fds1);
  EXPECT_LT(std::llabs(static_cast<long long>(free1) - static_cast<long long>(free0)), 16ll << 20);
  EXPECT_LE(fds1, fds0 + 2);
  EXPECT_EQ(ListCount(), 0);
  cudaFree(p);
}

TEST_F(IpcTest, KilledClientsLeasedBuffersAreFreedAfterExpiry) {
  const uint64_t free0 = FreeBytes();
  // The child allocates 2 GiB on the server and shares 1 GiB of its own, both
  // with 2 s leases, says "ready", and is killed with SIGKILL.
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  std::string target = daemon_->target();
  std::vector<char*> argv = {g_self.data(), const_cast<char*>("--child-lease"), target.data(), nullptr};
  pid_t child;
  ASSERT_EQ(posix_spawn(&child, g_self.c_str(), &fa, nullptr, argv.data(), environ), 0);
  close(pipefd[1]);
  char buf[16] = {};
  ASSERT_GT(read(pipefd[0], buf, 5), 0);
  ASSERT_EQ(std::string(buf, 5), "ready");
  const uint64_t free_held = FreeBytes();
  EXPECT_GT(free0 - free_held, uint64_t{3} << 30) << "the child's 3 GiB are not visible";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(pipefd[0]);
  // Leases run 2 s; the reaper runs every 250 ms.
  uint64_t free_after = 0;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    free_after = FreeBytes();
    if (free_after + (64 << 20) >= free0) break;
  }
  std::printf("[ info ] free before %.2f GiB, held %.2f GiB, after expiry %.2f GiB\n", free0 / 1073741824.0,
              free_held / 1073741824.0, free_after / 1073741824.0);
  EXPECT_GE(free_after + (64 << 20), free0);
  EXPECT_EQ(ListCount(), 0);
}

int ChildLease(const char* target) {
  client::KernelClient c(target);
  ServerBuffer s(c, 0, uint64_t{2} << 30, 2, "child-server");
  CudaIpcBuffer b(c, 0, uint64_t{1} << 30, 2, "child-ipc");
  if (!s.status().ok() || !b.status().ok()) {
    std::fprintf(stderr, "child: %s / %s\n", s.status().error_message().c_str(), b.status().error_message().c_str());
    return 1;
  }
  std::fputs("ready", stdout);
  std::fflush(stdout);
  pause();  // until SIGKILL: destructors never run
  return 0;
}

}  // namespace
}  // namespace kerneld::testing

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child-lease") return kerneld::testing::ChildLease(argv[2]);
  kerneld::testing::g_self = "/proc/self/exe";
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n > 0) kerneld::testing::g_self.assign(path, static_cast<size_t>(n));
  std::string why;
  if (!kerneld::testing::HaveGpu(&why)) {
    std::printf("SKIPPED: no GPU on this machine (%s)\n", why.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
