// Without tokens or TLS, local users are still kept apart: each plaintext
// TCP connection without a token is a principal of its own, so what it
// registers is invisible to every other connection (NOT_FOUND, exactly like
// an unknown id) and released when it closes (docs/security.md,
// --anonymous_buffers). The real daemon, real gRPC, real /metrics.
#include <fcntl.h>
#include <sys/mman.h>

#include <chrono>
#include <thread>

#include "daemon_fixture.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::testing {
namespace {

// A connection of its own: a local subchannel pool and distinct channel
// arguments keep two channels from sharing one HTTP/2 connection.
std::shared_ptr<grpc::Channel> Connection(const std::string& target, int n) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kerneld.test.connection", n);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

// A shared-memory object every user may read and write (0666): what a
// caller without a verified uid may register. Unlinked on destruction.
struct WorldShm {
  explicit WorldShm(const std::string& n) : name(n) {
    shm_unlink(name.c_str());
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0666);
    ok = fd >= 0 && ftruncate(fd, 4096) == 0 && fchmod(fd, 0666) == 0;
    if (fd >= 0) close(fd);
  }
  ~WorldShm() { shm_unlink(name.c_str()); }
  std::string name;
  bool ok = false;
};

grpc::Status Register(grpc::Channel* ch, const std::string& shm, std::string* id) {
  auto stub = v1::BufferService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
  grpc::ClientContext ctx;
  v1::RegisterSharedMemoryRequest req;
  req.set_shm_name(shm);
  req.set_byte_size(4096);
  v1::RegisterSharedMemoryResponse resp;
  grpc::Status st = stub->RegisterSharedMemory(&ctx, req, &resp);
  *id = resp.buffer_id();
  return st;
}

std::vector<std::string> List(grpc::Channel* ch, grpc::Status* st) {
  auto stub = v1::BufferService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
  grpc::ClientContext ctx;
  v1::ListBuffersRequest req;
  v1::ListBuffersResponse resp;
  *st = stub->ListBuffers(&ctx, req, &resp);
  std::vector<std::string> ids;
  for (const auto& b : resp.buffers()) ids.push_back(b.buffer_id());
  return ids;
}

grpc::Status Unregister(grpc::Channel* ch, const std::string& id) {
  auto stub = v1::BufferService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
  grpc::ClientContext ctx;
  v1::UnregisterBufferRequest req;
  req.set_buffer_id(id);
  v1::UnregisterBufferResponse resp;
  return stub->UnregisterBuffer(&ctx, req, &resp);
}

grpc::Status Renew(grpc::Channel* ch, const std::string& id) {
  auto stub = v1::BufferService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
  grpc::ClientContext ctx;
  v1::RenewLeaseRequest req;
  req.set_buffer_id(id);
  v1::RenewLeaseResponse resp;
  return stub->RenewLease(&ctx, req, &resp);
}

// Execute "scale" on 4 floats read from buffer `id`: resolves the id.
grpc::Status ScaleFromBuffer(grpc::Channel* ch, const std::string& id) {
  auto stub = v1::KernelService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
  grpc::ClientContext ctx;
  v1::ExecuteRequest req;
  req.set_op("scale");
  v1::Tensor& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(4);
  x.mutable_buffer()->set_buffer_id(id);
  (*req.mutable_attrs())["factor"].set_f(2.0);
  v1::ExecuteResponse resp;
  return stub->Execute(&ctx, req, &resp);
}

std::string Replace(std::string s, const std::string& what, const std::string& with) {
  for (size_t at; (at = s.find(what)) != std::string::npos;) s.replace(at, what.size(), with);
  return s;
}

// kerneld_buffers{kind="shared_memory"} once it equals `want`, polled for at
// most 20 s (the daemon's sweeper looks every second); the last value read
// otherwise.
double WaitShmBuffers(Daemon& d, double want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  double v = -1;
  do {
    v = SeriesValue(d.Metrics(), "kerneld_buffers", {"kind=\"shared_memory\""}).value_or(-1);
    if (v == want) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll interval, not a sync
  } while (std::chrono::steady_clock::now() < deadline);
  return v;
}

std::string ShmName(const char* what) {
  return "/kerneld-anon-" + std::string(what) + "-" + std::to_string(getpid());
}

TEST(AnonymousIsolation, AnotherConnectionCannotSeeResolveOrUnregisterABuffer) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  WorldShm shm(ShmName("iso"));
  ASSERT_TRUE(shm.ok);
  auto a = Connection(d.target(), 1), b = Connection(d.target(), 2);
  std::string id;
  ASSERT_TRUE(Register(a.get(), shm.name, &id).ok());
  grpc::Status st;
  EXPECT_EQ(List(a.get(), &st), std::vector<std::string>{id});
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(List(b.get(), &st).empty()) << "another connection lists the buffer";
  ASSERT_TRUE(st.ok()) << st.error_message();

  // Every way of naming it answers exactly like an id that never existed.
  const std::string ghost = "buf-999999-deadbeef";
  using Call = grpc::Status (*)(grpc::Channel*, const std::string&);
  for (Call call : {Call(&ScaleFromBuffer), Call(&Renew), Call(&Unregister)}) {
    const grpc::Status theirs = call(b.get(), id), unknown = call(b.get(), ghost);
    EXPECT_EQ(theirs.error_code(), grpc::StatusCode::NOT_FOUND) << theirs.error_message();
    EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();
    EXPECT_EQ(Replace(theirs.error_message(), id, "ID"),
              Replace(unknown.error_message(), ghost, "ID"));
  }
  // Still there for its owner, which B's Unregister did not touch.
  EXPECT_TRUE(ScaleFromBuffer(a.get(), id).ok());
  EXPECT_EQ(List(a.get(), &st), std::vector<std::string>{id});
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

v1::GetServerInfoResponse Info(grpc::Channel* ch, grpc::Status* st) {
  auto stub = v1::KernelService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
  grpc::ClientContext ctx;
  v1::GetServerInfoResponse resp;
  *st = stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &resp);
  return resp;
}

// GetServerInfo tells a caller who it is, and whether that principal is its
// connection alone: a client with two connections (the Python client's
// native library beside grpcio) learns from it that its buffers are found
// only over the one that registered them.
TEST(AnonymousIsolation, ServerInfoSaysThePrincipalIsTheConnection) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  auto a = Connection(d.target(), 1), b = Connection(d.target(), 2);
  grpc::Status st;
  const v1::GetServerInfoResponse ia = Info(a.get(), &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const v1::GetServerInfoResponse ib = Info(b.get(), &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(ia.principal_is_connection());
  EXPECT_TRUE(ib.principal_is_connection());
  EXPECT_EQ(ia.principal().rfind("conn:", 0), 0u) << ia.principal();
  EXPECT_NE(ia.principal(), ib.principal());
  EXPECT_EQ(Info(a.get(), &st).principal(), ia.principal()) << "the same connection, the same";

  // The unix socket: the caller's uid, whichever connection.
  auto u = grpc::CreateChannel(d.unix_target(), grpc::InsecureChannelCredentials());
  const v1::GetServerInfoResponse iu = Info(u.get(), &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(iu.principal_is_connection());
  EXPECT_EQ(iu.principal(), "uid:" + std::to_string(getuid()));
  EXPECT_EQ(d.Terminate(), 0) << d.Log();

  Daemon shared({"--anonymous_buffers=shared"});
  ASSERT_TRUE(shared.ok()) << shared.Log();
  auto c = Connection(shared.target(), 3);
  const v1::GetServerInfoResponse ic = Info(c.get(), &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(ic.principal_is_connection());
  EXPECT_EQ(ic.principal(), "anonymous");
  EXPECT_EQ(shared.Terminate(), 0) << shared.Log();
}

TEST(AnonymousIsolation, ClosingTheConnectionReleasesItsBuffers) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  WorldShm shm1(ShmName("rel1")), shm2(ShmName("rel2"));
  ASSERT_TRUE(shm1.ok && shm2.ok);
  auto keep = Connection(d.target(), 1);
  std::string kept_id, id1, id2;
  ASSERT_TRUE(Register(keep.get(), shm1.name, &kept_id).ok());
  {
    auto a = Connection(d.target(), 2);
    ASSERT_TRUE(Register(a.get(), shm1.name, &id1).ok());
    ASSERT_TRUE(Register(a.get(), shm2.name, &id2).ok());
    ASSERT_EQ(WaitShmBuffers(d, 3), 3);
  }  // the channel's last reference: gRPC closes its connection
  EXPECT_EQ(WaitShmBuffers(d, 1), 1) << "a closed connection's buffers were not released";
  // The connection that stays keeps its own; a new one does not inherit
  // the closed one's (its serial is new even where its descriptor is not).
  grpc::Status st;
  EXPECT_EQ(List(keep.get(), &st), std::vector<std::string>{kept_id});
  auto c = Connection(d.target(), 3);
  EXPECT_TRUE(List(c.get(), &st).empty());
  EXPECT_EQ(ScaleFromBuffer(c.get(), id1).error_code(), grpc::StatusCode::NOT_FOUND);
  keep.reset();
  EXPECT_EQ(WaitShmBuffers(d, 0), 0);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(AnonymousIsolation, AnonymousConnectionsShareOneQuota) {
  // Otherwise a caller would multiply its quota by opening connections.
  Daemon d({"--quota_buffers=1"});
  ASSERT_TRUE(d.ok()) << d.Log();
  WorldShm shm(ShmName("quota"));
  ASSERT_TRUE(shm.ok);
  auto a = Connection(d.target(), 1), b = Connection(d.target(), 2);
  std::string id;
  ASSERT_TRUE(Register(a.get(), shm.name, &id).ok());
  const grpc::Status st = Register(b.get(), shm.name, &id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("every anonymous connection together"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(AnonymousIsolation, SharedModeKeepsOnePrincipal) {
  Daemon d({"--anonymous_buffers=shared"});
  ASSERT_TRUE(d.ok()) << d.Log();
  WorldShm shm(ShmName("shared"));
  ASSERT_TRUE(shm.ok);
  auto a = Connection(d.target(), 1), b = Connection(d.target(), 2);
  std::string id;
  ASSERT_TRUE(Register(a.get(), shm.name, &id).ok());
  grpc::Status st;
  EXPECT_EQ(List(b.get(), &st), std::vector<std::string>{id});
  EXPECT_TRUE(ScaleFromBuffer(b.get(), id).ok());
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(AnonymousIsolation, BadModeIsRefused) {
  std::string out;
  const int rc = RunCapture(std::string(KERNELD_BINARY) + " --anonymous_buffers=per_user", &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("--anonymous_buffers"), std::string::npos) << out;
}

TEST(AnonymousIsolation, Ipv6LoopbackServesAndIsolates) {
  const int probe = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  const bool v6 = probe >= 0 && bind(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (probe >= 0) close(probe);
  if (!v6) GTEST_SKIP() << "no IPv6 loopback here";
  Daemon d({"--listen=[::1]:0"});
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string v6_target;
  for (const auto& a : d.Ready("grpc"))
    if (a.rfind("[::1]:", 0) == 0) v6_target = a;
  ASSERT_FALSE(v6_target.empty()) << d.Log();
  EXPECT_NE(v6_target, "[::1]:0");  // the port the kernel picked
  WorldShm shm(ShmName("v6"));
  ASSERT_TRUE(shm.ok);
  auto a = Connection(v6_target, 1), b = Connection(v6_target, 2);
  std::string id;
  ASSERT_TRUE(Register(a.get(), shm.name, &id).ok());
  grpc::Status st;
  EXPECT_TRUE(List(b.get(), &st).empty());
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

}  // namespace
}  // namespace kerneld::testing
