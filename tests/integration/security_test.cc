// Identity and isolation through the real daemon (docs/security.md): TLS and
// mutual TLS with certificates made here by openssl, bearer tokens and their
// reload, two principals that cannot see each other's buffers, quotas, and a
// root daemon that will not open for another uid what that uid could not.
#include <fcntl.h>
#include <grp.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/generic/generic_stub.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <future>

#include "buffers.h"
#include "daemon_fixture.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace kerneld::testing {
namespace {

using client::ClientSecurity;
using client::KernelClient;
using client::SharedMemoryBuffer;

// Test certificates, made once per run and removed at exit: a CA and the
// daemon's certificate (127.0.0.1, localhost), a client "alice" of that CA,
// a client "svc" of that CA with an empty subject and only SANs (a URI, then
// a DNS name), and a second CA with a client "mallory" of its own.
class Certs : public ::testing::Environment {
 public:
  static std::string dir;
  static std::string error;
  void SetUp() override {
    char tmpl[] = "/tmp/kerneld-certs-XXXXXX";
    dir = mkdtemp(tmpl);
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script =
        "set -e; cd " + dir + ";" + "openssl req -x509 " + ec +
        " -keyout ca.key -out ca.pem -days 2 -subj /CN=kerneld-test-ca;" + "openssl req -x509 " +
        ec + " -keyout ca2.key -out ca2.pem -days 2 -subj /CN=other-ca;" +
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > "
        "server.ext;" +
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext;" + "openssl req " + ec +
        " -keyout server.key -out server.csr -subj /CN=localhost;" +
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
        "-days 2 "
        "-extfile server.ext;" +
        "openssl req " + ec + " -keyout alice.key -out alice.csr -subj /O=team-a/CN=alice;" +
        "openssl x509 -req -in alice.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out alice.pem "
        "-days 2 "
        "-extfile client.ext;" +
        "openssl req " + ec + " -keyout mallory.key -out mallory.csr -subj /CN=mallory;" +
        "openssl x509 -req -in mallory.csr -CA ca2.pem -CAkey ca2.key -CAcreateserial -out "
        "mallory.pem "
        "-days 2 -extfile client.ext;" +
        "printf 'subjectAltName=critical,URI:spiffe://example.org/svc,DNS:svc.example\\n"
        "extendedKeyUsage=clientAuth\\n' > svc.ext;" +
        "openssl req " + ec + " -keyout svc.key -out svc.csr -subj /;" +
        "openssl x509 -req -in svc.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out svc.pem "
        "-days 2 -extfile svc.ext;" +
        "openssl x509 -in svc.pem -noout -subject | grep -qx 'subject=' ||"
        " { echo 'svc.pem: openssl did not make the subject empty'; exit 1; };" +
        // Two subjects equal for their first 128 bytes as gRPC prints them
        // (RFC 2253, most specific first: CN, OU, OU, then O), differing in O.
        "for w in one two; do openssl req " + ec +
        " -keyout long-$w.key -out long-$w.csr -subj "
        "/O=org-$w/OU=" +
        std::string(60, 'a') + "/OU=" + std::string(60, 'b') + "/CN=" + std::string(50, 'c') + ";" +
        "openssl x509 -req -in long-$w.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out "
        "long-$w.pem -days 2 -extfile client.ext; done;" +
        // An empty subject whose only SAN reads like a unix-socket principal.
        "printf 'subjectAltName=critical,URI:uid:0\nextendedKeyUsage=clientAuth\n' > uid0.ext;" +
        "openssl req " + ec + " -keyout uid0.key -out uid0.csr -subj /;" +
        "openssl x509 -req -in uid0.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out uid0.pem "
        "-days 2 -extfile uid0.ext;";
    std::string out;
    if (RunCapture(script, &out) != 0) error = "openssl failed: " + out;
  }
  void TearDown() override {
    if (!dir.empty() && std::system(("rm -rf " + dir).c_str()) != 0) std::perror("rm");
  }
  static std::string Path(const std::string& f) { return dir + "/" + f; }
};
std::string Certs::dir;
std::string Certs::error;
const auto* const kCerts = ::testing::AddGlobalTestEnvironment(new Certs);

#define REQUIRE_CERTS() \
  if (!Certs::error.empty()) GTEST_FAIL() << Certs::error

ClientSecurity Tls(const std::string& ca, const std::string& who = "",
                   const std::string& token = "") {
  ClientSecurity s;
  s.tls_ca = Certs::Path(ca);
  if (!who.empty()) {
    s.tls_cert = Certs::Path(who + ".pem");
    s.tls_key = Certs::Path(who + ".key");
  }
  s.token = token;
  return s;
}

ClientSecurity Token(const std::string& token) {
  ClientSecurity s;
  s.token = token;
  return s;
}

std::unique_ptr<KernelClient> Connect(const std::string& target, const ClientSecurity& sec) {
  return std::make_unique<KernelClient>(target,
                                        client::ClientOptions(256, std::chrono::seconds(10), sec));
}

grpc::StatusCode ListCode(KernelClient& c, std::string* msg = nullptr) {
  v1::ListKernelsResponse r;
  grpc::Status st = c.ListKernels(&r);
  if (msg) *msg = st.error_message();
  return st.error_code();
}

const std::string kAlice = "alice-token-0123456789abcdef";
const std::string kBob = "bob-token-0123456789abcdef";
const std::string kOps = "ops-token-0123456789abcdef";

std::string WriteTokens(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/tokens";
  std::ofstream(path + ".tmp") << text;
  std::rename((path + ".tmp").c_str(), path.c_str());
  return path;
}

// A token file outside the fixture's directory (the daemon needs it at
// start); removed with the certificates.
std::string TokenFile(const std::string& text) {
  static int n = 0;
  const std::string dir = Certs::dir + "/tok" + std::to_string(n++);
  mkdir(dir.c_str(), 0700);
  return WriteTokens(dir, text);
}

std::vector<v1::BufferInfo> List(KernelClient& c, bool all, grpc::Status* st) {
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::ListBuffersRequest req;
  req.set_all_principals(all);
  v1::ListBuffersResponse resp;
  *st = stub->ListBuffers(&ctx, req, &resp);
  return {resp.buffers().begin(), resp.buffers().end()};
}

std::vector<std::string> Ids(const std::vector<v1::BufferInfo>& bs) {
  std::vector<std::string> out;
  for (const auto& b : bs) out.push_back(b.buffer_id());
  return out;
}

grpc::Status ScaleIn(KernelClient& c, const std::string& buffer_id) {
  v1::ExecuteRequest req;
  req.set_op("scale");
  v1::Tensor& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(4);
  x.mutable_buffer()->set_buffer_id(buffer_id);
  (*req.mutable_attrs())["factor"].set_f(1.0);
  v1::ExecuteResponse resp;
  return c.Execute(req, &resp);
}

grpc::Status Call(KernelClient& c, const std::string& rpc, const std::string& id) {
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  if (rpc == "renew") {
    v1::RenewLeaseRequest req;
    req.set_buffer_id(id);
    v1::RenewLeaseResponse resp;
    return stub->RenewLease(&ctx, req, &resp);
  }
  v1::UnregisterBufferRequest req;
  req.set_buffer_id(id);
  v1::UnregisterBufferResponse resp;
  return stub->UnregisterBuffer(&ctx, req, &resp);
}

// A shared-memory object owned by `uid` (group: ours when it is our uid, else
// the same number), mode 0600; unlinked on destruction.
struct ShmObject {
  ShmObject(const std::string& n, uid_t uid) : name(n) {
    const gid_t gid = uid == getuid() ? getgid() : static_cast<gid_t>(uid);
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ok = fd >= 0 && ftruncate(fd, 4096) == 0 && fchown(fd, uid, gid) == 0 && fchmod(fd, 0600) == 0;
    if (fd >= 0) close(fd);
  }
  ~ShmObject() { shm_unlink(name.c_str()); }
  std::string name;
  bool ok = false;
};

// A shared-memory object of ours that every user may read and write (0666):
// what a caller without a verified uid may register.
struct WorldShm {
  explicit WorldShm(const std::string& n) : name(n) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0666);
    ok = fd >= 0 && ftruncate(fd, 4096) == 0 && fchmod(fd, 0666) == 0;
    if (fd >= 0) close(fd);
  }
  ~WorldShm() { shm_unlink(name.c_str()); }
  std::string name;
  bool ok = false;
};

grpc::Status RegisterShm(KernelClient& c, const std::string& shm_name, std::string* buffer_id) {
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::RegisterSharedMemoryRequest req;
  req.set_shm_name(shm_name);
  req.set_byte_size(4096);
  v1::RegisterSharedMemoryResponse resp;
  grpc::Status st = stub->RegisterSharedMemory(&ctx, req, &resp);
  *buffer_id = resp.buffer_id();
  return st;
}

// ---- TLS -------------------------------------------------------------------

TEST(Tls, TheDaemonIsVerifiedAgainstTheRightCaOnly) {
  REQUIRE_CERTS();
  Daemon d({"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem"),
            "--tls_key=" + Certs::Path("server.key")});
  ASSERT_TRUE(d.ok()) << d.Log();
  ASSERT_EQ(d.Ready("grpc_tls").size(), 1u) << d.Log();
  const std::string tls = d.Ready("grpc_tls")[0];
  EXPECT_EQ(ListCode(*Connect(tls, Tls("ca.pem"))), grpc::StatusCode::OK);
  EXPECT_NE(ListCode(*Connect(tls, Tls("ca2.pem"))), grpc::StatusCode::OK);    // wrong CA
  EXPECT_NE(ListCode(*Connect(tls, ClientSecurity{})), grpc::StatusCode::OK);  // plaintext to TLS
  EXPECT_EQ(ListCode(d.client()), grpc::StatusCode::OK);  // --listen stays plaintext
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Tls, MutualTlsRequiresAClientCertificateAndNamesThePrincipal) {
  REQUIRE_CERTS();
  Daemon d({"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem"),
            "--tls_key=" + Certs::Path("server.key"), "--tls_client_ca=" + Certs::Path("ca.pem")});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string tls = d.Ready("grpc_tls").at(0);
  auto alice = Connect(tls, Tls("ca.pem", "alice"));
  EXPECT_EQ(ListCode(*alice), grpc::StatusCode::OK);
  EXPECT_NE(ListCode(*Connect(tls, Tls("ca.pem"))), grpc::StatusCode::OK);  // no certificate
  EXPECT_NE(ListCode(*Connect(tls, Tls("ca.pem", "mallory"))),
            grpc::StatusCode::OK);  // another CA's
  // A certificate names no uid: only an object anyone may open read-write.
  WorldShm obj("/kd-alice-" + std::to_string(getpid()));
  ASSERT_TRUE(obj.ok);
  std::string id;
  grpc::Status st = RegisterShm(*alice, obj.name, &id);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto mine = List(*alice, false, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].owner(), "x509:CN=alice,O=team-a");
  // The plaintext, anonymous client is another principal.
  EXPECT_TRUE(List(d.client(), false, &st).empty());
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Tls, AClientCertificateWithAnEmptySubjectIsNamedByItsFirstSan) {
  REQUIRE_CERTS();
  Daemon d({"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem"),
            "--tls_key=" + Certs::Path("server.key"), "--tls_client_ca=" + Certs::Path("ca.pem")});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string tls = d.Ready("grpc_tls").at(0);
  auto svc = Connect(tls, Tls("ca.pem", "svc"));
  WorldShm obj("/kd-svc-" + std::to_string(getpid()));
  ASSERT_TRUE(obj.ok);
  std::string id;
  grpc::Status st = RegisterShm(*svc, obj.name, &id);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto mine = List(*svc, false, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(mine.size(), 1u);
  // The first SAN, whole, in the certificates' namespace; not the second,
  // not an empty name, not anonymous.
  EXPECT_EQ(mine[0].owner(), "x509:san:spiffe://example.org/svc");
  // A principal of its own: alice (same CA) does not see the buffer.
  EXPECT_TRUE(List(*Connect(tls, Tls("ca.pem", "alice")), false, &st).empty());
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Listen, PlaintextBeyondLoopbackNeedsItsFlag) {
  Daemon refused({"--listen=0.0.0.0:0"}, /*with_unix=*/false);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.Log().find("--allow_insecure_remote"), std::string::npos) << refused.Log();
  Daemon allowed({"--listen=0.0.0.0:0", "--allow_insecure_remote"}, /*with_unix=*/false);
  ASSERT_TRUE(allowed.ok()) << allowed.Log();
  EXPECT_NE(allowed.Log().find("WARNING"), std::string::npos) << allowed.Log();
  EXPECT_EQ(allowed.Terminate(), 0);
}

TEST(Listen, BadSecurityFilesStopStartUpWithTheFlagNamed) {
  REQUIRE_CERTS();
  struct Case {
    std::vector<std::string> flags;
    std::string expect;
  } cases[] = {
      {{"--tls_listen=127.0.0.1:0", "--tls_cert=/nonexistent.pem",
        "--tls_key=" + Certs::Path("server.key")},
       "cannot read --tls_cert"},
      {{"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem"),
        "--tls_key=" + Certs::Path("ca.pem")},
       "--tls_key"},
      {{"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem")},
       "needs --tls_cert and --tls_key"},
      {{"--auth_tokens=/nonexistent/tokens"}, "cannot open --auth_tokens"},
      {{"--auth_tokens=" + TokenFile("short alice user\n")}, "line 1: the token must be"},
  };
  for (const auto& c : cases) {
    Daemon d(c.flags, /*with_unix=*/false);
    EXPECT_FALSE(d.ok()) << c.expect;
    EXPECT_NE(d.Log().find(c.expect), std::string::npos) << d.Log();
  }
}

// ---- Tokens ----------------------------------------------------------------

// --grpc_api=sync identifies every call as the callback API does.
TEST(Tokens, SyncApiRefusesAMissingTokenAndServesAGoodOne) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n");
  Daemon d({"--auth_tokens=" + file, "--grpc_api=sync"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ExecuteResponse resp;
  grpc::Status st = d.client().Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  auto stream = d.client().OpenStream();
  stream->Send(ScaleRequest(DType::kFloat32, {4}, 2.0));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  auto alice = Connect(d.target(), Token(kAlice));
  ASSERT_TRUE(alice->Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp).ok());
  EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
  auto s2 = alice->OpenStream();
  ASSERT_TRUE(s2->Send(ScaleRequest(DType::kFloat32, {4}, 2.0)));
  s2->CloseSend();
  ASSERT_TRUE(s2->Receive(&resp));
  EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
  EXPECT_TRUE(s2->Finish().ok());
}

TEST(Tokens, RightWrongMissingAndRoles) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n" + kOps + " ops admin\n");
  Daemon d({"--auth_tokens=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string msg;
  EXPECT_EQ(ListCode(d.client(), &msg), grpc::StatusCode::UNAUTHENTICATED);  // missing
  EXPECT_NE(msg.find("Bearer"), std::string::npos) << msg;
  v1::ExecuteResponse resp;
  EXPECT_EQ(d.client().Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto stream = d.client().OpenStream();
  stream->Send(ScaleRequest(DType::kFloat32, {4}, 2.0));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListCode(*Connect(d.target(), Token("not-a-token-0123456789")), &msg),
            grpc::StatusCode::UNAUTHENTICATED);  // wrong
  EXPECT_NE(msg.find("unknown bearer token"), std::string::npos) << msg;

  // Health and reflection stay open, for probes.
  EXPECT_TRUE(d.Serving());
  auto refl = grpc::reflection::v1alpha::ServerReflection::NewStub(d.client().channel());
  grpc::ClientContext rctx;
  auto rs = refl->ServerReflectionInfo(&rctx);
  grpc::reflection::v1alpha::ServerReflectionRequest rq;
  rq.set_list_services("*");
  ASSERT_TRUE(rs->Write(rq));
  rs->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse rr;
  EXPECT_TRUE(rs->Read(&rr));
  EXPECT_TRUE(rs->Finish().ok());

  auto alice = Connect(d.target(), Token(kAlice));
  auto ops = Connect(d.target(), Token(kOps));
  EXPECT_EQ(ListCode(*alice), grpc::StatusCode::OK);  // right
  EXPECT_TRUE(alice->Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp).ok());
  grpc::Status st;
  List(*alice, /*all=*/true, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("admin"), std::string::npos) << st.error_message();
  List(*ops, /*all=*/true, &st);
  EXPECT_TRUE(st.ok()) << st.error_message();
  // A unix-socket peer needs no token: its uid is its principal.
  auto local = Connect(d.unix_target(), ClientSecurity{});
  EXPECT_EQ(ListCode(*local), grpc::StatusCode::OK);
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Tokens, SighupRereadsTheFileAndKeepsItOnAMistake) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n");
  const std::string dir = file.substr(0, file.rfind('/'));
  Daemon d({"--auth_tokens=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto alice = Connect(d.target(), Token(kAlice));
  auto bob = Connect(d.target(), Token(kBob));
  EXPECT_EQ(ListCode(*alice), grpc::StatusCode::OK);
  EXPECT_EQ(ListCode(*bob), grpc::StatusCode::UNAUTHENTICATED);
  WriteTokens(dir, kBob + " bob user\n");  // alice revoked, bob added
  kill(d.pid(), SIGHUP);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ListCode(*bob) != grpc::StatusCode::OK && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ListCode(*bob), grpc::StatusCode::OK);
  EXPECT_EQ(ListCode(*alice), grpc::StatusCode::UNAUTHENTICATED);
  WriteTokens(dir, kBob + " bob superuser\n");  // a mistake: bob stays
  kill(d.pid(), SIGHUP);
  while (d.Log().find("previous tokens stay") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(d.Log().find("role 'superuser'"), std::string::npos) << d.Log();
  EXPECT_EQ(ListCode(*bob), grpc::StatusCode::OK);
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Kernelctl, TokenFromTheFlagOrTheEnvironmentAndTls) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n");
  Daemon d({"--auth_tokens=" + file, "--tls_listen=127.0.0.1:0",
            "--tls_cert=" + Certs::Path("server.pem"), "--tls_key=" + Certs::Path("server.key")});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string ctl = std::string(KERNELCTL_BINARY) + " --target ";
  std::string out;
  EXPECT_EQ(RunCapture("env -u KERNELD_TOKEN " + ctl + d.target() + " list", &out), 1) << out;
  EXPECT_NE(out.find("no credentials"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + d.target() + " --token " + kAlice + " list", &out), 0) << out;
  EXPECT_EQ(RunCapture("KERNELD_TOKEN=" + kAlice + " " + ctl + d.target() + " buffers list", &out),
            0)
      << out;
  const std::string tls = d.Ready("grpc_tls").at(0);
  EXPECT_EQ(RunCapture("KERNELD_TOKEN=" + kAlice + " " + ctl + tls + " --tls_ca " +
                           Certs::Path("ca.pem") + " info",
                       &out),
            0)
      << out;
  EXPECT_EQ(RunCapture(ctl + tls + " --tls_ca /nonexistent.pem info", &out), 2) << out;
  EXPECT_NE(out.find("cannot read --tls-ca"), std::string::npos) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Kernelctl, MutualTlsWithItsClientCertificateAndWithout) {
  REQUIRE_CERTS();
  Daemon d({"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem"),
            "--tls_key=" + Certs::Path("server.key"), "--tls_client_ca=" + Certs::Path("ca.pem")});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string ctl = std::string(KERNELCTL_BINARY) + " --target " + d.Ready("grpc_tls").at(0) +
                          " --tls_ca " + Certs::Path("ca.pem");
  const std::string alice =
      " --tls_cert " + Certs::Path("alice.pem") + " --tls_key " + Certs::Path("alice.key");
  std::string out;
  EXPECT_EQ(RunCapture(ctl + alice + " info", &out), 0) << out;
  // The certificate is the identity: what kernelctl registers is alice's.
  WorldShm obj("/kd-ctl-" + std::to_string(getpid()));  // a certificate names no uid
  ASSERT_TRUE(obj.ok);
  EXPECT_EQ(RunCapture(ctl + alice + " buffers register-shm " + obj.name + " 4096", &out), 0)
      << out;
  EXPECT_EQ(RunCapture(ctl + alice + " buffers list", &out), 0) << out;
  EXPECT_NE(out.find("CN=alice"), std::string::npos) << out;
  EXPECT_NE(out.find(obj.name), std::string::npos) << out;

  // Without a certificate, or with another CA's, the daemon refuses the
  // handshake: kernelctl fails with UNAVAILABLE (gRPC says only "Socket
  // closed") and a line on what to check, from either command family.
  const struct {
    std::string flags, hint;
  } refused[] = {
      {"", "pass --tls-cert and --tls-key"},
      {" --tls_cert " + Certs::Path("mallory.pem") + " --tls_key " + Certs::Path("mallory.key"),
       "check that --tls-cert is signed by a CA it trusts"},
  };
  for (const auto& r : refused) {
    EXPECT_EQ(RunCapture(ctl + r.flags + " info", &out), 1) << r.flags << ": " << out;
    EXPECT_NE(out.find("kernelctl: UNAVAILABLE: "), std::string::npos) << r.flags << ": " << out;
    EXPECT_NE(out.find(r.hint), std::string::npos) << r.flags << ": " << out;
    EXPECT_EQ(RunCapture(ctl + r.flags + " buffers list", &out), 1) << r.flags << ": " << out;
    EXPECT_NE(out.find("kernelctl: UNAVAILABLE: "), std::string::npos) << r.flags << ": " << out;
    EXPECT_NE(out.find(r.hint), std::string::npos) << r.flags << ": " << out;
  }
  // A certificate without its key is a usage error, before any connection.
  EXPECT_EQ(RunCapture(ctl + " --tls_cert " + Certs::Path("alice.pem") + " info", &out), 2) << out;
  EXPECT_NE(out.find("--tls-cert and --tls-key go together"), std::string::npos) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

// ---- Isolation ---------------------------------------------------------------

TEST(Isolation, APrincipalSeesUsesRenewsAndUnregistersOnlyItsOwn) {
  REQUIRE_CERTS();
  // uid=: the tokens' shared memory (this test's, 0600) is checked against it.
  const std::string uid = " uid=" + std::to_string(getuid());
  const std::string file = TokenFile(kAlice + " alice user" + uid + "\n" + kBob + " bob user" +
                                     uid + "\n" + kOps + " ops admin\n");
  Daemon d({"--auth_tokens=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto alice = Connect(d.target(), Token(kAlice));
  auto bob = Connect(d.target(), Token(kBob));
  auto ops = Connect(d.target(), Token(kOps));
  SharedMemoryBuffer a(*alice, 4096), b(*bob, 4096);
  ASSERT_TRUE(a.status().ok()) << a.status().error_message();
  ASSERT_TRUE(b.status().ok()) << b.status().error_message();
  grpc::Status st;
  EXPECT_EQ(Ids(List(*alice, false, &st)), std::vector<std::string>{a.id()});
  EXPECT_EQ(Ids(List(*bob, false, &st)), std::vector<std::string>{b.id()});
  EXPECT_EQ(List(*ops, true, &st).size(), 2u);
  EXPECT_TRUE(List(*ops, false, &st).empty());  // an admin's own list is its own

  // Alice's id answers bob exactly as an unknown id does.
  auto same_as_unknown = [&](const grpc::Status& got, const grpc::Status& unknown,
                             const std::string& what) {
    EXPECT_EQ(got.error_code(), grpc::StatusCode::NOT_FOUND) << what << ": " << got.error_message();
    std::string m = got.error_message();
    m.replace(m.find(a.id()), a.id().size(), "ID");
    std::string u = unknown.error_message();
    u.replace(u.find("buf-999-00000000"), std::strlen("buf-999-00000000"), "ID");
    EXPECT_EQ(m, u) << what;
  };
  same_as_unknown(ScaleIn(*bob, a.id()), ScaleIn(*bob, "buf-999-00000000"), "use");
  same_as_unknown(Call(*bob, "renew", a.id()), Call(*bob, "renew", "buf-999-00000000"), "renew");
  same_as_unknown(Call(*bob, "unregister", a.id()), Call(*bob, "unregister", "buf-999-00000000"),
                  "unregister");
  EXPECT_TRUE(ScaleIn(*alice, a.id()).ok());  // still alice's, untouched
  EXPECT_TRUE(Call(*alice, "renew", a.id()).ok());

  // The unix socket's uid principal is a third one.
  auto local = Connect(d.unix_target(), ClientSecurity{});
  EXPECT_EQ(ScaleIn(*local, a.id()).error_code(), grpc::StatusCode::NOT_FOUND);

  // An admin may unregister anyone's buffer.
  EXPECT_TRUE(Call(*ops, "unregister", a.id()).ok());
  EXPECT_EQ(ScaleIn(*alice, a.id()).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(d.Terminate(), 0);
}

// An abstract unix socket (Linux: a name, no file) is accepted by kerneld
// too, so its callers are named by SO_PEERCRED like a unix socket's (they
// were `anonymous`: gRPC accepted them and knew no uid).
TEST(Isolation, AnAbstractUnixSocketsPeerIsNamedByItsUid) {
  const std::string name = "unix-abstract:kerneld-security-test-" + std::to_string(getpid());
  Daemon d({"--listen=" + name});
  ASSERT_TRUE(d.ok()) << d.Log();
  const auto bound = d.Ready("grpc");
  EXPECT_NE(std::find(bound.begin(), bound.end(), name), bound.end()) << d.Log();
  auto local = Connect(name, ClientSecurity{});
  SharedMemoryBuffer shm(*local, 4096);
  ASSERT_TRUE(shm.status().ok()) << shm.status().error_message();
  grpc::Status st;
  auto mine = List(*local, false, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].owner(), "uid:" + std::to_string(getuid()));
  // The same uid over the file socket is the same principal.
  EXPECT_EQ(Ids(List(*Connect(d.unix_target(), ClientSecurity{}), false, &st)),
            std::vector<std::string>{shm.id()});
  EXPECT_EQ(d.Terminate(), 0);
}

// ---- Quotas ------------------------------------------------------------------

v1::ExecuteRequest Sleep(double ms) {
  auto req = ScaleRequest(DType::kFloat32, {1024}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  req.set_backend("cpu");
  return req;
}

TEST(Quotas, EachOneExceededSaysWhichAndTheUse) {
  REQUIRE_CERTS();
  const std::string uid = " uid=" + std::to_string(getuid());
  const std::string file = TokenFile(kAlice + " alice user max_buffers=1" + uid + "\n" + kBob +
                                     " bob user" + uid + "\n");
  Daemon d({"--auth_tokens=" + file, "--quota_buffers=2", "--quota_bytes=12K", "--quota_inflight=1",
            "--enable_test_ops", "--cpu_workers=4"});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto alice = Connect(d.target(), Token(kAlice));
  auto bob = Connect(d.target(), Token(kBob));

  // Number of buffers (the default, then alice's own line).
  auto b1 = std::make_unique<SharedMemoryBuffer>(*bob, 4096);
  SharedMemoryBuffer b2(*bob, 4096), b3(*bob, 4096);
  ASSERT_TRUE(b1->status().ok() && b2.status().ok()) << b1->status().error_message();
  EXPECT_EQ(b3.status().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(b3.status().error_message().find("max_buffers"), std::string::npos)
      << b3.status().error_message();
  EXPECT_NE(b3.status().error_message().find("holds 2 buffers"), std::string::npos)
      << b3.status().error_message();
  SharedMemoryBuffer a1(*alice, 4096), a2(*alice, 4096);
  EXPECT_TRUE(a1.status().ok()) << a1.status().error_message();
  EXPECT_EQ(a2.status().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(a2.status().error_message().find("at most 1"), std::string::npos)
      << a2.status().error_message();

  // Bytes registered: 4096 held + 10000 > 12 KiB.
  b1.reset();
  SharedMemoryBuffer big(*bob, 10000);
  EXPECT_EQ(big.status().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(big.status().error_message().find("max_bytes"), std::string::npos)
      << big.status().error_message();
  EXPECT_NE(big.status().error_message().find("holds 4096 bytes"), std::string::npos)
      << big.status().error_message();

  // Requests in flight, per principal: bob's second waits on nothing but
  // his quota; alice is not held back by bob's request.
  auto slow = std::async(std::launch::async, [&] {
    v1::ExecuteResponse r;
    return bob->Execute(Sleep(1500), &r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  v1::ExecuteResponse resp;
  grpc::Status st = bob->Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("max_inflight"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("1 requests in flight"), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(alice->Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp).ok());
  EXPECT_TRUE(slow.get().ok());
  EXPECT_TRUE(bob->Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp).ok());  // released

  // Counted without naming anyone.
  const std::string m = d.Metrics();
  for (const char* q : {"bytes", "buffers", "inflight"})
    EXPECT_GE(SeriesValue(m, "kerneld_principal_quota_exceeded_total",
                          {std::string("quota=\"") + q + "\""})
                  .value_or(0),
              1)
        << q;
  EXPECT_EQ(m.find("alice"), std::string::npos);
  EXPECT_EQ(m.find("bob"), std::string::npos);
  EXPECT_EQ(d.Terminate(), 0);
}

// ---- Logs and traces ---------------------------------------------------------

TEST(Principal, InTheRequestLogAndTraceNeverInMetrics) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n");
  const std::string trace = Certs::dir + "/trace.jsonl";
  Daemon d({"--auth_tokens=" + file, "--log_level=1", "--trace_file=" + trace});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto alice = Connect(d.target(), Token(kAlice));
  v1::ExecuteResponse resp;
  ASSERT_TRUE(alice->Execute(ScaleRequest(DType::kFloat32, {4}, 2.0), &resp).ok());
  EXPECT_EQ(d.Metrics().find("alice"), std::string::npos);
  EXPECT_EQ(d.Terminate(), 0);
  EXPECT_NE(d.Log().find("principal=token:alice"), std::string::npos) << d.Log();
  std::ifstream f(trace);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("\"principal\":\"token:alice\""), std::string::npos) << ss.str();
}

// ---- No confused deputy --------------------------------------------------------

TEST(ConfusedDeputy, ARootDaemonOpensOnlyWhatTheCallerCould) {
  std::string out;
  if (getuid() != 0 || RunCapture("command -v setpriv", &out) != 0)
    GTEST_SKIP() << "needs root and setpriv (util-linux) to run a client as another uid; uid is "
                 << getuid();
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  // nobody must reach the socket and run kernelctl: both go where it may.
  const std::string sock = d.unix_target().substr(5);
  const std::string ctl = d.dir() + "/kernelctl";
  ASSERT_EQ(RunCapture("cp " + std::string(KERNELCTL_BINARY) + " " + ctl, &out), 0) << out;
  chmod(d.dir().c_str(), 0755);
  chmod(sock.c_str(), 0666);
  const std::string pid = std::to_string(getpid());
  ShmObject root_only("/kd-root-" + pid, 0), nobodys("/kd-nobody-" + pid, 65534);
  ASSERT_TRUE(root_only.ok && nobodys.ok);
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups " + ctl;
  auto reg = [&](const std::string& who, const std::string& target, const std::string& name) {
    return RunCapture(who + " --target " + target + " buffers register-shm " + name + " 4096",
                      &out);
  };
  // The attack: nobody asks for root's 0600 object.
  EXPECT_EQ(reg(as_nobody, d.unix_target(), root_only.name), 1) << out;
  EXPECT_NE(out.find("PERMISSION_DENIED"), std::string::npos) << out;
  EXPECT_NE(out.find("uid 65534"), std::string::npos) << out;
  EXPECT_EQ(reg(as_nobody, d.target(), root_only.name), 1) << out;  // over loopback TCP too
  EXPECT_NE(out.find("PERMISSION_DENIED"), std::string::npos) << out;
  // Its own object, it may; and the buffer is its principal's.
  EXPECT_EQ(reg(as_nobody, d.unix_target(), nobodys.name), 0) << out;
  EXPECT_EQ(RunCapture(as_nobody + " --target " + d.unix_target() + " buffers list", &out), 0)
      << out;
  EXPECT_NE(out.find("uid:65534"), std::string::npos) << out;
  // Root could open both itself.
  EXPECT_EQ(reg(ctl, d.unix_target(), root_only.name), 0) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

// A token's uid= is the uid checked, whoever owns the connection: over
// loopback TCP from this process (whose socket owner may open the object) and
// over the unix socket (whose SO_PEERCRED uid may too). Needs no root: the
// daemon runs as this test, can open the object itself, and must refuse.
TEST(ConfusedDeputy, ATokensUidIsTheUidChecked) {
  REQUIRE_CERTS();
  const uid_t me = getuid();
  const uid_t other = me == 65534 ? 65533 : 65534;
  const std::string carol = "carol-token-0123456789abcdef";  // no uid=
  const std::string file =
      TokenFile(kAlice + " alice user uid=" + std::to_string(other) + "\n" + kBob +
                " bob user uid=" + std::to_string(me) + "\n" + carol + " carol user\n");
  Daemon d({"--auth_tokens=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  ShmObject mine("/kd-tok-" + std::to_string(getpid()), me);  // 0600, this test's
  ASSERT_TRUE(mine.ok);
  std::string id;
  for (const std::string& target : {d.target(), d.unix_target()}) {
    grpc::Status st = RegisterShm(*Connect(target, Token(kAlice)), mine.name, &id);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << target << ": " << st.error_message();
    EXPECT_NE(st.error_message().find("uid " + std::to_string(other) + " may not open it"),
              std::string::npos)
        << target << ": " << st.error_message();
    EXPECT_NE(st.error_message().find("owner uid " + std::to_string(me)), std::string::npos)
        << st.error_message();
  }
  grpc::Status st;
  EXPECT_TRUE(List(*Connect(d.target(), Token(kAlice)), false, &st).empty());  // nothing leaked

  // The owner's uid may.
  auto bob = Connect(d.target(), Token(kBob));
  st = RegisterShm(*bob, mine.name, &id);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto bobs = List(*bob, false, &st);
  ASSERT_EQ(bobs.size(), 1u);
  EXPECT_EQ(bobs[0].buffer_id(), id);
  EXPECT_EQ(bobs[0].owner(), "token:bob");
  // A token without uid= over TCP has no verified uid: refused, and told why.
  st = RegisterShm(*Connect(d.target(), Token(carol)), mine.name, &id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("without a verified uid"), std::string::npos)
      << st.error_message();
  // Over the unix socket the same token is checked against the socket's uid.
  st = RegisterShm(*Connect(d.unix_target(), Token(carol)), mine.name, &id);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(d.Terminate(), 0);
}

// ---- Issue 27: identity holes ------------------------------------------------

// A TCP caller's uid is never inferred (it was read from /proc/net/tcp, whose
// lines a local user can shape): without a token naming uid=, a TCP caller
// may register only objects every user may read and write.
TEST(Spoof, ATcpCallerWithoutAVerifiedUidGetsOnlyWorldWritableObjects) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  ShmObject mine("/kd-tcp-" + std::to_string(getpid()), getuid());  // 0600, the daemon's uid too
  WorldShm world("/kd-tcpw-" + std::to_string(getpid()));
  ASSERT_TRUE(mine.ok && world.ok);
  std::string id;
  grpc::Status st = RegisterShm(d.client(), mine.name, &id);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("without a verified uid"), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(RegisterShm(d.client(), world.name, &id).ok());
  // The unix socket's SO_PEERCRED uid owns it: allowed.
  st = RegisterShm(*Connect(d.unix_target(), ClientSecurity{}), mine.name, &id);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(d.Terminate(), 0);
}

// The attack of issue 27, as `nobody` against a root daemon: connect from
// 127.0.0.1:Y, then from the same port open and close a connection to a
// listener of its own on 127.0.0.2 at kerneld's port number, leaving a
// TIME_WAIT line (uid 0) that names Y and kerneld's port; then ask for
// root's 0600 object. Run by the child this test starts (see below).
void SpoofAttempts(int port, const std::string& shm_name, int attempts, int* won, int* refused) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in la{};
  la.sin_family = AF_INET;
  la.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.2", &la.sin_addr);
  const bool have_listener =
      bind(lfd, reinterpret_cast<sockaddr*>(&la), sizeof la) == 0 && listen(lfd, 16) == 0;
  for (int i = 0; i < attempts; ++i) {
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(c, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &local.sin_addr);
    bind(c, reinterpret_cast<sockaddr*>(&local), sizeof local);
    socklen_t len = sizeof local;
    getsockname(c, reinterpret_cast<sockaddr*>(&local), &len);
    sockaddr_in kd{};
    kd.sin_family = AF_INET;
    kd.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &kd.sin_addr);
    if (connect(c, reinterpret_cast<sockaddr*>(&kd), sizeof kd) != 0) {
      close(c);
      continue;
    }
    if (have_listener) {  // the TIME_WAIT line: same local port, kerneld's port number
      const int t = socket(AF_INET, SOCK_STREAM, 0);
      setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      bind(t, reinterpret_cast<sockaddr*>(&local), sizeof local);
      if (connect(t, reinterpret_cast<sockaddr*>(&la), sizeof la) == 0) {
        const int a = accept(lfd, nullptr, nullptr);
        close(t);  // the active close: t's end goes to TIME_WAIT
        if (a >= 0) close(a);
      } else {
        close(t);
      }
    }
    auto channel = grpc::CreateInsecureChannelFromFd("127.0.0.1:" + std::to_string(port), c);
    auto stub = v1::BufferService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RegisterSharedMemoryRequest req;
    req.set_shm_name(shm_name);
    req.set_byte_size(4096);
    v1::RegisterSharedMemoryResponse resp;
    const grpc::Status st = stub->RegisterSharedMemory(&ctx, req, &resp);
    if (st.ok()) ++*won;
    if (st.error_code() == grpc::StatusCode::PERMISSION_DENIED) ++*refused;
  }
  close(lfd);
}

// The child's half: runs only when the parent test below starts this binary
// as nobody, with the daemon's port and root's object in the environment.
TEST(Spoof, AttackerChild) {
  const char* port = std::getenv("KERNELD_SPOOF_PORT");
  const char* name = std::getenv("KERNELD_SPOOF_SHM");
  if (port == nullptr || name == nullptr) GTEST_SKIP() << "run by TimeWaitLinesNeverMakeNobodyRoot";
  int won = 0, refused = 0;
  SpoofAttempts(std::stoi(port), name, 1000, &won, &refused);
  EXPECT_EQ(won, 0) << "registered root's 0600 object as uid " << getuid();
  EXPECT_EQ(refused, 1000);
}

TEST(Spoof, TimeWaitLinesNeverMakeNobodyRoot) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run the attacker as nobody; uid " << getuid();
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  ShmObject root_only("/kd-spoof-" + std::to_string(getpid()), 0);
  ASSERT_TRUE(root_only.ok);
  // nobody must reach the test binary: a copy in the daemon's directory.
  std::string out;
  const std::string self = d.dir() + "/security_test";
  ASSERT_EQ(RunCapture("cp /proc/" + std::to_string(getpid()) + "/exe " + self, &out), 0) << out;
  chmod(d.dir().c_str(), 0755);
  const int port = std::stoi(d.target().substr(d.target().rfind(':') + 1));
  const pid_t child = fork();
  if (child == 0) {
    setenv("KERNELD_SPOOF_PORT", std::to_string(port).c_str(), 1);
    setenv("KERNELD_SPOOF_SHM", root_only.name.c_str(), 1);
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    execl(self.c_str(), self.c_str(), "--gtest_filter=Spoof.AttackerChild", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the attacker (as nobody) registered root's object, or could not run: status " << status;
  EXPECT_EQ(d.Terminate(), 0);
}

// Two certificates are two principals: subjects equal for their first 128
// bytes (they were cut there into one), and a certificate whose only SAN
// reads "uid:0" is not root's unix-socket principal.
TEST(Principals, CertificatesNeverCollideWithEachOtherOrWithUids) {
  REQUIRE_CERTS();
  Daemon d({"--tls_listen=127.0.0.1:0", "--tls_cert=" + Certs::Path("server.pem"),
            "--tls_key=" + Certs::Path("server.key"), "--tls_client_ca=" + Certs::Path("ca.pem")});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string tls = d.Ready("grpc_tls").at(0);
  auto one = Connect(tls, Tls("ca.pem", "long-one"));
  auto two = Connect(tls, Tls("ca.pem", "long-two"));
  auto uid0 = Connect(tls, Tls("ca.pem", "uid0"));
  auto local = Connect(d.unix_target(), ClientSecurity{});  // uid:<ours>
  WorldShm obj("/kd-long-" + std::to_string(getpid()));
  ShmObject mine("/kd-mine-" + std::to_string(getpid()), getuid());
  ASSERT_TRUE(obj.ok && mine.ok);
  std::string id_one, id_local;
  grpc::Status st = RegisterShm(*one, obj.name, &id_one);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(RegisterShm(*local, mine.name, &id_local).ok());
  auto listed = List(*one, false, &st);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].owner().rfind("x509:CN=", 0), 0u) << listed[0].owner();
  EXPECT_NE(listed[0].owner().find("org-one"), std::string::npos) << listed[0].owner();
  // The second certificate sees nothing and cannot touch the first's buffer.
  EXPECT_TRUE(List(*two, false, &st).empty());
  EXPECT_EQ(Call(*two, "unregister", id_one).error_code(), grpc::StatusCode::NOT_FOUND);
  // SAN uid:0 is x509:san:uid:0, not the unix socket's uid principal.
  EXPECT_TRUE(List(*uid0, false, &st).empty());
  EXPECT_EQ(Call(*uid0, "unregister", id_local).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ListCode(*uid0), grpc::StatusCode::OK);
  std::string id_uid0;
  ASSERT_TRUE(RegisterShm(*uid0, obj.name, &id_uid0).ok());
  EXPECT_EQ(List(*uid0, false, &st).at(0).owner(), "x509:san:uid:0");
  EXPECT_EQ(Ids(List(*local, false, &st)), std::vector<std::string>{id_local});
  EXPECT_EQ(d.Terminate(), 0);
}

// SIGHUP with a FIFO at the token path: the reload is refused with a line
// that says why (it blocked in open() forever), a later SIGHUP still applies,
// and SIGTERM stops the daemon.
TEST(Tokens, AFifoAtTheTokenPathNeitherWedgesReloadNorStop) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n");
  const std::string dir = file.substr(0, file.rfind('/'));
  Daemon d({"--auth_tokens=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  ASSERT_EQ(unlink(file.c_str()), 0);
  ASSERT_EQ(mkfifo(file.c_str(), 0600), 0);
  kill(d.pid(), SIGHUP);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (d.Log().find("not a regular file") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(d.Log().find("is not a regular file (a FIFO)"), std::string::npos) << d.Log();
  EXPECT_EQ(ListCode(*Connect(d.target(), Token(kAlice))), grpc::StatusCode::OK);  // old tokens
  unlink(file.c_str());
  WriteTokens(dir, kBob + " bob user\n");
  kill(d.pid(), SIGHUP);
  auto bob = Connect(d.target(), Token(kBob));
  while (ListCode(*bob) != grpc::StatusCode::OK && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ListCode(*bob), grpc::StatusCode::OK);
  EXPECT_EQ(d.Terminate(std::chrono::seconds(20)), 0) << d.Log();
}

// --rate_limit: per principal, refused with RESOURCE_EXHAUSTED that names
// it; another principal is not held back.
TEST(RateLimit, APrincipalOverItsRateIsRefusedAndOthersAreNot) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n" + kBob + " bob user\n");
  Daemon d({"--auth_tokens=" + file, "--rate_limit=5"});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto alice = Connect(d.target(), Token(kAlice));
  auto bob = Connect(d.target(), Token(kBob));
  int ok = 0, limited = 0;
  std::string msg;
  for (int i = 0; i < 30; ++i) {
    std::string m;
    const grpc::StatusCode c = ListCode(*alice, &m);
    ok += c == grpc::StatusCode::OK;
    if (c == grpc::StatusCode::RESOURCE_EXHAUSTED) ++limited, msg = m;
  }
  EXPECT_GE(limited, 1);
  EXPECT_LE(ok, 5 + 5 * 2);  // the burst, plus what 30 fast calls could refill
  EXPECT_NE(msg.find("'token:alice' is over --rate_limit=5"), std::string::npos) << msg;
  EXPECT_EQ(ListCode(*bob), grpc::StatusCode::OK);
  EXPECT_EQ(d.Terminate(), 0);
}

// A raw call: `bytes` as the request message of `method`.
grpc::Status RawCall(KernelClient& c, const std::string& method, const std::string& bytes,
                     const std::string& token = "") {
  grpc::GenericStub stub(c.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req(&slice, 1), resp;
  grpc::Status result;
  std::promise<void> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status st) {
    result = std::move(st);
    done.set_value();
  });
  done.get_future().wait();
  return result;
}

// Field 1 (op, a string) holding bytes that are not UTF-8.
const std::string kBadUtf8 = std::string("\x0a\x02\xff\xfe", 4);
const std::string kGarbage = std::string("\xff\xff\xff\xff\xff", 5);

// Credentials are checked before the message is parsed: without them, a
// message protobuf would refuse (and log about) is UNAUTHENTICATED and
// logs nothing; a message that does not parse is INVALID_ARGUMENT with a
// message (it was UNIMPLEMENTED ""). On both gRPC APIs.
TEST(AuthBeforeParse, UnauthenticatedBeforeParsingAndInvalidArgumentAfter) {
  REQUIRE_CERTS();
  const std::string file = TokenFile(kAlice + " alice user\n");
  for (const std::string api : {"callback", "sync"}) {
    Daemon d({"--auth_tokens=" + file, "--grpc_api=" + api});
    ASSERT_TRUE(d.ok()) << d.Log();
    for (const std::string method :
         {"/kerneld.v1.KernelService/Execute", "/kerneld.v1.KernelService/ListKernels",
          "/kerneld.v1.BufferService/RegisterSharedMemory"}) {
      for (int i = 0; i < 50; ++i) {
        const grpc::Status st = RawCall(d.client(), method, kBadUtf8);
        ASSERT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << api << " " << method << ": " << st.error_message();
      }
      for (const std::string& bytes : {kBadUtf8, kGarbage}) {
        const grpc::Status st = RawCall(d.client(), method, bytes, kAlice);
        EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
            << api << " " << method << ": " << st.error_message();
        EXPECT_NE(st.error_message().find("is not a valid kerneld.v1."), std::string::npos)
            << api << " " << method << ": " << st.error_message();
      }
    }
    const std::string log = d.Log();
    // 6 authenticated bad messages may log (rate limited); 150 refused ones
    // must not: at most one line per authenticated one.
    size_t lines = 0;
    for (size_t at = 0; (at = log.find("libprotobuf", at)) != std::string::npos; ++at) ++lines;
    EXPECT_LE(lines, 6u) << api << ":\n" << log;
    EXPECT_EQ(d.Terminate(), 0);
  }
}

}  // namespace
}  // namespace kerneld::testing
