// Identity pieces without a daemon: the token file parser, the /proc/net/tcp
// lookup, the permission rule that keeps kerneld from being a confused
// deputy, and the registry's per-principal quotas.
#include <gtest/gtest.h>

#include "auth/local_peer.h"
#include "auth/token_file.h"
#include "buffers/buffer_registry.h"
#include "config.h"

namespace kerneld::server {
namespace {

const std::string kTok = "0123456789abcdef0123";

TEST(TokenFile, ParsesRolesOptionsAndComments) {
  TokenTable t;
  const std::string text =
      "# comment\n\n" + kTok + " alice user\n" + kTok +
      "X ops admin uid=1000 max_bytes=4M max_buffers=3 max_inflight=2  # trailing\n";
  ASSERT_TRUE(ParseTokenFile(text, &t).ok());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[kTok].principal, "alice");
  EXPECT_EQ(t[kTok].role, Role::kUser);
  EXPECT_FALSE(t[kTok].uid.has_value());
  const TokenEntry& ops = t[kTok + "X"];
  EXPECT_EQ(ops.role, Role::kAdmin);
  EXPECT_EQ(*ops.uid, 1000u);
  EXPECT_EQ(*ops.max_bytes, 4 << 20);
  EXPECT_EQ(*ops.max_buffers, 3);
  EXPECT_EQ(*ops.max_inflight, 2);
}

TEST(TokenFile, RefusesWithTheLineAndWithoutEchoingTheToken) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {kTok + " alice", "line 1: expected TOKEN PRINCIPAL ROLE"},
      {"short alice user", "line 1: the token must be"},
      {"\n" + kTok + " alice root", "line 2: role 'root'"},
      {kTok + " anonymous user", "not \"anonymous\""},
      {kTok + " alice user color=red", "unknown option 'color'"},
      {kTok + " alice user max_bytes=lots", "max_bytes=lots is not a size"},
      {kTok + " alice user max_buffers=-1", "is not a count"},
      {kTok + " alice user uid=bob", "is not a uid"},
      {kTok + " alice user\n" + kTok + " bob user", "line 2: this token is already"},
  };
  for (const auto& c : cases) {
    TokenTable t;
    Status st = ParseTokenFile(c.text, &t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find(kTok), std::string::npos) << st.message();
  }
}

TEST(TokenFile, MissingFileSaysSo) {
  TokenTable t;
  Status st = LoadTokenFile("/nonexistent/tokens", &t);
  EXPECT_NE(st.message().find("cannot open --auth_tokens"), std::string::npos) << st.message();
}

TEST(Config, ByteSizesAndInsecureRemote) {
  int64_t v = 0;
  EXPECT_TRUE(ParseByteSize("64K", &v));
  EXPECT_EQ(v, 64 << 10);
  EXPECT_TRUE(ParseByteSize("3", &v));
  EXPECT_EQ(v, 3);
  EXPECT_FALSE(ParseByteSize("-1", &v));
  EXPECT_FALSE(ParseByteSize("99999999999999T", &v));
  EXPECT_TRUE(IsLocalAddress("unix:/tmp/x"));
  EXPECT_TRUE(IsLocalAddress("127.0.0.1:1"));
  EXPECT_TRUE(IsLocalAddress("[::1]:1"));
  EXPECT_FALSE(IsLocalAddress("0.0.0.0:1"));

  Config cfg;
  bool help = false;
  const char* remote[] = {"kerneld", "--listen=0.0.0.0:50051"};
  EXPECT_NE(ParseFlags(2, const_cast<char**>(remote), &cfg, &help).find("--allow_insecure_remote"),
            std::string::npos);
  Config ok;
  const char* allowed[] = {"kerneld", "--listen=0.0.0.0:50051", "--allow_insecure_remote"};
  EXPECT_EQ(ParseFlags(3, const_cast<char**>(allowed), &ok, &help), "");
  Config tls;
  const char* half[] = {"kerneld", "--tls_listen=127.0.0.1:0", "--tls_cert=a.pem"};
  EXPECT_NE(ParseFlags(3, const_cast<char**>(half), &tls, &help).find("--tls_key"),
            std::string::npos);
}

TEST(LocalPeer, ProcNetAddresses) {
  bool v6 = false;
  EXPECT_EQ(ProcNetAddress("ipv4:127.0.0.1:40000", &v6), "0100007F:9C40");
  EXPECT_FALSE(v6);
  EXPECT_EQ(ProcNetAddress("ipv6:[::1]:443", &v6), "00000000000000000000000001000000:01BB");
  EXPECT_TRUE(v6);
  EXPECT_EQ(ProcNetAddress("unix:/x", &v6), "");
  EXPECT_EQ(ProcNetAddress("ipv4:127.0.0.1:99999", &v6), "");
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n"
      "   0: 0100007F:C350 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "1\n"
      "   1: 0100007F:9C40 0100007F:0050 01 00000000:00000000 00:00000000 00000000  1000        0 "
      "2\n"
      "   2: 0100007F:9C40 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1001        0 "
      "3\n";
  // Only the connection to one of the daemon's ports counts.
  EXPECT_EQ(FindUidInProcNetTcp(table, "0100007F:9C40", {50000}), std::optional<uid_t>(1001));
  EXPECT_EQ(FindUidInProcNetTcp(table, "0100007F:9C40", {81}), std::nullopt);
  EXPECT_EQ(FindUidInProcNetTcp(table, "0100007F:1234", {50000}), std::nullopt);
}

struct stat Obj(uid_t uid, gid_t gid, mode_t mode) {
  struct stat st {};
  st.st_uid = uid;
  st.st_gid = gid;
  st.st_mode = S_IFREG | mode;
  return st;
}

TEST(LocalPeer, MayReadWriteFollowsTheOwnersBits) {
  // The object: root's, mode 0600, asked for by nobody.
  EXPECT_NE(MayReadWrite(Obj(0, 0, 0600), 65534u, 65534u), "");
  EXPECT_NE(MayReadWrite(Obj(0, 0, 0600), std::nullopt, std::nullopt), "");
  EXPECT_EQ(MayReadWrite(Obj(0, 0, 0600), 0u, 0u), "");  // root may
  EXPECT_EQ(MayReadWrite(Obj(1000, 1000, 0600), 1000u, 1000u), "");
  EXPECT_NE(MayReadWrite(Obj(1000, 1000, 0400), 1000u, 1000u), "");  // read-only for its owner
  EXPECT_EQ(MayReadWrite(Obj(1000, 77, 0660), 2000u, 77u), "");      // its group
  EXPECT_NE(MayReadWrite(Obj(1000, 77, 0606), 2000u, 77u), "");      // group bits apply, not other
  EXPECT_EQ(MayReadWrite(Obj(1000, 1000, 0666), std::nullopt, std::nullopt), "");
  const std::string why = MayReadWrite(Obj(0, 0, 0600), 65534u, 65534u);
  EXPECT_NE(why.find("uid 65534"), std::string::npos) << why;
  EXPECT_NE(why.find("mode 0600"), std::string::npos) << why;
}

std::shared_ptr<Region> Mem(const std::string& owner, uint64_t size, std::vector<char>* backing) {
  backing->resize(size);
  auto r = std::make_shared<Region>();
  r->base = backing->data();
  r->size = size;
  r->owner = owner;
  return r;
}

TEST(RegistryQuota, BuffersAndBytesPerPrincipal) {
  BufferRegistry reg(/*start_reaper=*/false);
  std::vector<char> a1, a2, a3, b1;
  const BufferQuota q{/*max_bytes=*/300, /*max_buffers=*/2};
  std::string id1, id2, id3, idb;
  ASSERT_TRUE(reg.Add(Mem("alice", 100, &a1), q, &id1).ok());
  ASSERT_TRUE(reg.Add(Mem("alice", 100, &a2), q, &id2).ok());
  Status st = reg.Add(Mem("alice", 10, &a3), q, &id3);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("max_buffers"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("holds 2"), std::string::npos) << st.message();
  // Another principal has its own account.
  ASSERT_TRUE(reg.Add(Mem("bob", 300, &b1), q, &idb).ok());
  bool deferred = false;
  ASSERT_TRUE(reg.Unregister("alice", id2, &deferred).ok());
  st = reg.CheckQuota("alice", 250, q);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("max_bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("holds 100 bytes"), std::string::npos) << st.message();
  EXPECT_TRUE(reg.CheckQuota("alice", 200, q).ok());
  auto usage = reg.UsageByPrincipal();
  EXPECT_EQ(usage["alice"].buffers, 1u);
  EXPECT_EQ(usage["bob"].bytes, 300u);
  // Bob cannot unregister alice's buffer; an admin (any_owner) can.
  EXPECT_EQ(reg.Unregister("bob", id1, &deferred).code(), StatusCode::kNotFound);
  EXPECT_TRUE(reg.Unregister("ops", id1, &deferred, /*any_owner=*/true).ok());
  EXPECT_EQ(reg.UsageByPrincipal().count("alice"), 0u);
}

TEST(RegistryQuota, ExpiredLeasesGiveTheirBytesBack) {
  BufferRegistry reg(/*start_reaper=*/false);
  std::vector<char> a;
  auto r = Mem("alice", 64, &a);
  r->lease_seconds = 1;
  std::string id;
  ASSERT_TRUE(reg.Add(r, BufferQuota{64, 1}, &id).ok());
  r->expires_ns.store(0);
  r.reset();
  EXPECT_EQ(reg.ExpireLeases(), 1);
  EXPECT_TRUE(reg.UsageByPrincipal().empty());
}

}  // namespace
}  // namespace kerneld::server
