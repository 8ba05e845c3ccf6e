// Shared buffers through the real daemon: POSIX shared memory end to end (in
// place, separate outputs, offsets), leases, deferred unregister, and every
// bad reference, each leaving the daemon serving. Every case runs on both
// gRPC APIs (--grpc_api=callback, the default, and sync).
#include "buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <future>
#include <map>
#include <string>

#include "daemon_fixture.h"
#include "reference.h"

namespace kerneld::testing {
namespace {

using client::SharedMemoryBuffer;

// The parameter: the daemon's --grpc_api. One daemon per API, shared by the
// suite's cases.
class BuffersTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() {
    for (auto& [api, d] : daemons_) {
      EXPECT_EQ(d->Terminate(), 0) << d->Log();
      delete d;
    }
    daemons_.clear();
  }
  void SetUp() override {
    Daemon*& d = daemons_[GetParam()];
    if (d == nullptr) d = new Daemon({"--enable_test_ops", "--grpc_api=" + GetParam()});
    daemon_ = d;
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
  }
  void TearDown() override {
    v1::ExecuteResponse resp;
    EXPECT_TRUE(daemon_->client().Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &resp).ok());
  }
  // The unix socket: shared memory needs a caller whose uid is known.
  client::KernelClient& c() { return daemon_->unix_client(); }
  std::unique_ptr<v1::BufferService::Stub> Stub() {
    return v1::BufferService::NewStub(c().channel());
  }
  static inline std::map<std::string, Daemon*> daemons_;
  Daemon* daemon_ = nullptr;
};

void Put(char* dst, const client::HostTensor& t) {
  std::string b = client::Encode(t.dtype, t.values);
  std::memcpy(dst, b.data(), b.size());
}
std::vector<double> Get(const char* src, DType dt, int64_t n) {
  std::vector<double> v;
  client::Decode(dt, std::string(src, static_cast<size_t>(n) * ItemSize(dt)), &v);
  return v;
}
std::vector<double> Scaled(const client::HostTensor& x, double f) {
  client::HostTensors ref;
  std::string err;
  client::Reference("scale", {{"x", x}}, {{"factor", f}}, &ref, &err);
  return ref["y"].values;
}

TEST_P(BuffersTest, ScaleWithSeparateOutputAtOffsets) {
  SharedMemoryBuffer shm(c(), 1 << 16);
  ASSERT_TRUE(shm.status().ok()) << shm.status().error_message();
  std::mt19937_64 rng(3);
  auto x = client::Random(DType::kBFloat16, {4097}, rng);
  Put(shm.data() + 256, x);
  std::memset(shm.data() + 16384, 0xff, 4097 * 2);  // poison the output
  v1::ExecuteRequest req;
  req.set_op("scale");
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kBFloat16, {4097}, 256);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kBFloat16, {4097}, 16384);
  (*req.mutable_attrs())["factor"].set_f(-1.5);
  v1::ExecuteResponse resp;
  grpc::Status st = c().Execute(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // The response references the buffer; no bytes travel.
  ASSERT_TRUE(resp.outputs().at("y").has_buffer());
  EXPECT_EQ(resp.outputs().at("y").buffer().offset(), 16384u);
  EXPECT_TRUE(resp.outputs().at("y").inline_data().empty());
  auto cmp =
      client::Compare(Get(shm.data() + 16384, DType::kBFloat16, 4097), Scaled(x, -1.5), 1e-2, 1e-2);
  EXPECT_EQ(cmp.mismatches, 0);
  // Input untouched.
  EXPECT_EQ(Get(shm.data() + 256, DType::kBFloat16, 4097), x.values);
}

TEST_P(BuffersTest, ScaleInPlace) {
  SharedMemoryBuffer shm(c(), 8192);
  ASSERT_TRUE(shm.status().ok());
  std::mt19937_64 rng(4);
  auto x = client::Random(DType::kFloat32, {1000}, rng);
  Put(shm.data() + 64, x);
  v1::ExecuteRequest req;
  req.set_op("scale");
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {1000}, 64);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {1000}, 64);
  (*req.mutable_attrs())["factor"].set_f(3.0);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(c().Execute(req, &resp).ok());
  EXPECT_EQ(client::Compare(Get(shm.data() + 64, DType::kFloat32, 1000), Scaled(x, 3.0), 1e-5, 1e-5)
                .mismatches,
            0);
}

TEST_P(BuffersTest, InlineInputBufferOutput) {
  SharedMemoryBuffer shm(c(), 4096);
  ASSERT_TRUE(shm.status().ok());
  client::HostTensor x;
  auto req = ScaleRequest(DType::kFloat16, {127}, 0.5, &x);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat16, {127}, 2);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(c().Execute(req, &resp).ok());
  EXPECT_EQ(client::Compare(Get(shm.data() + 2, DType::kFloat16, 127), Scaled(x, 0.5), 1e-3, 1e-3)
                .mismatches,
            0);
}

TEST_P(BuffersTest, PartialOverlapRejected) {
  SharedMemoryBuffer shm(c(), 4096);
  ASSERT_TRUE(shm.status().ok());
  v1::ExecuteRequest req;
  req.set_op("scale");
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {100}, 0);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {100}, 8);
  (*req.mutable_attrs())["factor"].set_f(3.0);
  v1::ExecuteResponse resp;
  grpc::Status st = c().Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("overlaps input 'x'"), std::string::npos) << st.error_message();
}

TEST_P(BuffersTest, BadReferences) {
  SharedMemoryBuffer shm(c(), 1024);
  ASSERT_TRUE(shm.status().ok());
  auto run = [&](const v1::Tensor& x) {
    v1::ExecuteRequest req;
    req.set_op("scale");
    (*req.mutable_inputs())["x"] = x;
    (*req.mutable_attrs())["factor"].set_f(1.0);
    v1::ExecuteResponse resp;
    return c().Execute(req, &resp);
  };
  grpc::Status st = run(shm.Tensor(DType::kFloat32, {200}, 512));  // 800 bytes at 512 in 1024
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (const char* frag : {"offset 512", "800 bytes", "1024 bytes"})
    EXPECT_NE(st.error_message().find(frag), std::string::npos) << st.error_message();
  st = run(shm.Tensor(DType::kFloat32, {4}, ~uint64_t{0}));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  st = run(shm.Tensor(DType::kFloat32, {4}, 2));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("not a multiple of the element size 4"), std::string::npos)
      << st.error_message();
  v1::Tensor ghost = shm.Tensor(DType::kFloat32, {4}, 0);
  ghost.mutable_buffer()->set_buffer_id("buf-999-deadbeef");
  st = run(ghost);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("buf-999-deadbeef"), std::string::npos);
}

TEST_P(BuffersTest, RegistrationErrors) {
  auto stub = Stub();
  {
    grpc::ClientContext ctx;
    v1::RegisterSharedMemoryRequest req;
    req.set_shm_name("/kerneld-test-does-not-exist");
    req.set_byte_size(64);
    v1::RegisterSharedMemoryResponse resp;
    EXPECT_EQ(stub->RegisterSharedMemory(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::RegisterSharedMemoryRequest req;
    req.set_shm_name("no-slash");
    req.set_byte_size(64);
    v1::RegisterSharedMemoryResponse resp;
    EXPECT_EQ(stub->RegisterSharedMemory(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    SharedMemoryBuffer shm(c(), 4096);
    grpc::ClientContext ctx;
    v1::RegisterSharedMemoryRequest req;  // a region past the object's end
    req.set_shm_name(shm.shm_name());
    req.set_offset(4000);
    req.set_byte_size(200);
    v1::RegisterSharedMemoryResponse resp;
    grpc::Status st = stub->RegisterSharedMemory(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("4096 bytes"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::RegisterCudaIpcBufferRequest req;
    req.set_ipc_handle(std::string(63, 'x'));
    req.set_device_uuid("GPU-00000000-0000-0000-0000-000000000000");
    req.set_byte_size(64);
    v1::RegisterCudaIpcBufferResponse resp;
    grpc::Status st = stub->RegisterCudaIpcBuffer(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("exactly 64"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::RegisterCudaIpcBufferRequest req;
    req.set_ipc_handle(std::string(64, 'x'));
    req.set_device_uuid("GPU-00000000-0000-0000-0000-000000000000");
    req.set_byte_size(64);
    v1::RegisterCudaIpcBufferResponse resp;
    EXPECT_EQ(stub->RegisterCudaIpcBuffer(&ctx, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::UnregisterBufferRequest req;
    req.set_buffer_id("buf-1-00000000");
    v1::UnregisterBufferResponse resp;
    EXPECT_EQ(stub->UnregisterBuffer(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

TEST_P(BuffersTest, UnregisterTwiceAndList) {
  SharedMemoryBuffer shm(c(), 4096, 0, "my-weights");
  ASSERT_TRUE(shm.status().ok());
  auto stub = Stub();
  {
    grpc::ClientContext ctx;
    v1::ListBuffersResponse resp;
    ASSERT_TRUE(stub->ListBuffers(&ctx, {}, &resp).ok());
    bool found = false;
    for (const auto& b : resp.buffers()) {
      if (b.buffer_id() != shm.id()) continue;
      found = true;
      EXPECT_EQ(b.kind(), "shared_memory");
      EXPECT_EQ(b.device(), "cpu");
      EXPECT_EQ(b.byte_size(), 4096u);
      EXPECT_EQ(b.name(), "my-weights");
      EXPECT_EQ(b.owner(), "uid:" + std::to_string(getuid()));  // the unix socket's caller
    }
    EXPECT_TRUE(found);
  }
  EXPECT_TRUE(shm.Unregister().ok());
  grpc::ClientContext ctx;
  v1::UnregisterBufferRequest req;
  req.set_buffer_id(shm.id());
  v1::UnregisterBufferResponse resp;
  EXPECT_EQ(stub->UnregisterBuffer(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(BuffersTest, UnregisterWhileInUseIsDeferred) {
  SharedMemoryBuffer shm(c(), 4096);
  ASSERT_TRUE(shm.status().ok());
  std::mt19937_64 rng(9);
  auto x = client::Random(DType::kFloat32, {256}, rng);
  Put(shm.data(), x);
  v1::ExecuteRequest req;
  req.set_op("_test_sleep");
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {256}, 0);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {256}, 2048);
  (*req.mutable_attrs())["ms"].set_f(400);
  req.set_backend("cpu");
  auto fut = std::async(std::launch::async, [&] {
    v1::ExecuteResponse resp;
    return c().Execute(req, &resp);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto stub = Stub();
  grpc::ClientContext ctx;
  v1::UnregisterBufferRequest ur;
  ur.set_buffer_id(shm.id());
  v1::UnregisterBufferResponse uresp;
  ASSERT_TRUE(stub->UnregisterBuffer(&ctx, ur, &uresp).ok());
  EXPECT_TRUE(uresp.deferred());
  grpc::Status st = fut.get();
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(Get(shm.data() + 2048, DType::kFloat32, 256), x.values);  // it ran to completion
}

TEST_P(BuffersTest, LeaseExpires) {
  SharedMemoryBuffer shm(c(), 4096, /*lease_seconds=*/1);
  ASSERT_TRUE(shm.status().ok());
  auto stub = Stub();
  {
    grpc::ClientContext ctx;
    v1::RenewLeaseRequest req;
    req.set_buffer_id(shm.id());
    v1::RenewLeaseResponse resp;
    ASSERT_TRUE(stub->RenewLease(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.lease_seconds(), 1u);
    EXPECT_GT(resp.expires_in_ms(), 500);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  v1::ExecuteRequest req;
  req.set_op("scale");
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {4}, 0);
  (*req.mutable_attrs())["factor"].set_f(1.0);
  v1::ExecuteResponse resp;
  grpc::Status st = c().Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_NE(st.error_message().find("lease expired"), std::string::npos) << st.error_message();
}

INSTANTIATE_TEST_SUITE_P(Apis, BuffersTest, ::testing::Values("callback", "sync"));

TEST(BufferPermissions, RefusedBeyondLoopbackUnlessAllowed) {
  // Listening on all interfaces (traffic still only on loopback here).
  for (bool allow : {false, true}) {
    std::vector<std::string> flags = {"--listen=0.0.0.0:0", "--allow_insecure_remote"};
    if (allow) flags.push_back("--allow_client_buffers");
    Daemon d(flags, /*with_unix=*/false);
    ASSERT_TRUE(d.ok()) << d.Log();
    // The fixture's first listen is 127.0.0.1:0; the second is 0.0.0.0.
    // An anonymous TCP caller may register only an object every user may
    // read and write (docs/security.md), so the object is made 0666.
    const std::string name = "/kerneld-perm-" + std::to_string(getpid());
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0666);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fchmod(fd, 0666), 0);  // past the umask
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
    v1::RegisterSharedMemoryRequest req;
    req.set_shm_name(name);
    req.set_byte_size(4096);
    v1::RegisterSharedMemoryResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status st =
        v1::BufferService::NewStub(d.client().channel())->RegisterSharedMemory(&ctx, req, &resp);
    if (allow) {
      EXPECT_TRUE(st.ok()) << st.error_message();
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
      EXPECT_NE(st.error_message().find("--allow_client_buffers"), std::string::npos)
          << st.error_message();
    }
    shm_unlink(name.c_str());
    EXPECT_EQ(d.Terminate(), 0);
  }
}

}  // namespace
}  // namespace kerneld::testing
