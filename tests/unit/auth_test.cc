// Identity pieces without a daemon: the token file parser, principal names,
// the rate limiters, the permission rule that keeps kerneld from being a
// confused deputy, and the registry's per-principal quotas.
#include <gtest/gtest.h>

#include "auth/local_peer.h"
#include "auth/principal_name.h"
#include "auth/rate_limiter.h"
#include "auth/token_file.h"
#include "buffers/buffer_registry.h"
#include "config.h"
#include "service/library_log.h"

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

TEST(PrincipalName, EachSourceHasItsOwnNamespace) {
  EXPECT_EQ(TokenPrincipal("alice"), "token:alice");
  EXPECT_EQ(UidPrincipal(0), "uid:0");
  EXPECT_EQ(CertificatePrincipal("CN=alice,O=team-a", false), "x509:CN=alice,O=team-a");
  // The certificate: an empty subject, SAN URI:uid:0.
  EXPECT_EQ(CertificatePrincipal("uid:0", true), "x509:san:uid:0");
  EXPECT_NE(CertificatePrincipal("uid:0", true), UidPrincipal(0));
  // A token file's principal cannot reach another namespace either.
  EXPECT_NE(TokenPrincipal("uid:0"), UidPrincipal(0));
}

TEST(PrincipalName, CertificateNamesAreNeverCutIntoEquality) {
  const std::string head(200, 'a');
  const std::string a = head + "-one", b = head + "-two";
  EXPECT_NE(CertificatePrincipal(a, false), CertificatePrincipal(b, false));
  // Up to kMaxWholeCertificateName the name is whole; beyond, a display form
  // and the SHA-256 of the whole name.
  EXPECT_EQ(CertificatePrincipal(a, false), "x509:" + a);
  const std::string long_a = std::string(400, 'x') + "1", long_b = std::string(400, 'x') + "2";
  const Principal pa = CertificatePrincipal(long_a, false),
                  pb = CertificatePrincipal(long_b, false);
  EXPECT_NE(pa, pb);
  EXPECT_LT(pa.size(), 200u);
  EXPECT_NE(pa.find(" sha256:"), std::string::npos) << pa;
  EXPECT_EQ(pa, CertificatePrincipal(long_a, false));  // stable
  // A whole name that spells a shortened one's text differs from it: the
  // cut form holds a raw "…", which a whole name has only escaped.
  const std::string spelled = pa.substr(5);
  EXPECT_NE(CertificatePrincipal(spelled, false), pa);
  // Bytes that need escaping cannot make two names one.
  EXPECT_NE(CertificatePrincipal("a\\x00", false),
            CertificatePrincipal(std::string("a\0", 2), false));
}

TEST(RateLimiter, ATokenBucketPerPrincipal) {
  RateLimiter off(0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(off.Admit("p").ok());
  RateLimiter r(4);  // burst 4, 4 a second
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(r.AdmitAt("alice", t0).ok()) << i;
  Status st = r.AdmitAt("alice", t0);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("'alice' is over --rate_limit=4 requests/s; retry in 250 ms"),
            std::string::npos)
      << st.message();
  EXPECT_TRUE(r.AdmitAt("bob", t0).ok());  // another principal, another bucket
  EXPECT_TRUE(r.AdmitAt("alice", t0 + std::chrono::milliseconds(250)).ok());  // refilled one
  EXPECT_FALSE(r.AdmitAt("alice", t0 + std::chrono::milliseconds(260)).ok());
}

TEST(LibraryLog, RateLimitedWithTheDroppedCount) {
  LogRateLimit l(/*per_second=*/2, /*burst=*/3);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t dropped = 99;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.Admit(t0, &dropped));
  EXPECT_EQ(dropped, 0u);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(l.Admit(t0, &dropped));
  ASSERT_TRUE(l.Admit(t0 + std::chrono::milliseconds(500), &dropped));
  EXPECT_EQ(dropped, 1000u);
}

TEST(Config, QuotasDefaultToHostSizedValuesAndZeroMeansNone) {
  Config cfg;
  bool help = false;
  const char* none[] = {"kerneld"};
  ASSERT_EQ(ParseFlags(1, const_cast<char**>(none), &cfg, &help), "");
  EXPECT_GT(cfg.quota_bytes, 0);
  EXPECT_EQ(cfg.quota_buffers, 1024);
  EXPECT_EQ(cfg.quota_inflight, cfg.queue_capacity);
  EXPECT_EQ(cfg.rate_limit, 0);
  Config off;
  const char* zero[] = {"kerneld", "--quota_bytes=0", "--quota_buffers=0", "--quota_inflight=0",
                        "--rate_limit=2.5"};
  ASSERT_EQ(ParseFlags(5, const_cast<char**>(zero), &off, &help), "");
  EXPECT_EQ(off.quota_bytes, 0);
  EXPECT_EQ(off.quota_buffers, 0);
  EXPECT_EQ(off.quota_inflight, 0);
  EXPECT_EQ(off.rate_limit, 2.5);
  Config bad;
  const char* neg[] = {"kerneld", "--rate_limit=-1"};
  EXPECT_NE(ParseFlags(2, const_cast<char**>(neg), &bad, &help), "");
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
  // Without a verified uid, only the other bits, and the refusal says why.
  EXPECT_NE(
      MayReadWrite(Obj(0, 0, 0660), std::nullopt, std::nullopt).find("without a verified uid"),
      std::string::npos);
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
