// The buffer registry: bounds arithmetic (overflow included), ownership,
// deferred unregister, leases.
#include "buffers/buffer_registry.h"

#include <gtest/gtest.h>

#include <thread>

namespace kerneld::server {
namespace {

std::shared_ptr<Region> MakeRegion(uint64_t size, int* released, uint32_t lease = 0) {
  auto r = std::make_shared<Region>();
  static char backing[1 << 16];
  r->base = backing;
  r->size = size;
  r->owner = kAnonymous;
  r->lease_seconds = lease;
  r->release = [released] { ++*released; };
  return r;
}

TEST(Bounds, Arithmetic) {
  EXPECT_EQ(BufferRegistry::CheckBounds(0, 64, 64, 4), "");
  EXPECT_EQ(BufferRegistry::CheckBounds(60, 4, 64, 4), "");
  EXPECT_NE(BufferRegistry::CheckBounds(61, 4, 64, 1), "");
  EXPECT_NE(BufferRegistry::CheckBounds(64, 1, 64, 1), "");
  EXPECT_EQ(BufferRegistry::CheckBounds(64, 0, 64, 1), "");  // empty tensor at the end
  // offset + nbytes wraps around 2^64: must be rejected, not "fit".
  EXPECT_NE(BufferRegistry::CheckBounds(~uint64_t{0}, 2, 64, 1), "");
  EXPECT_NE(BufferRegistry::CheckBounds(~uint64_t{0}, 0, 64, 1), "");
  EXPECT_NE(BufferRegistry::CheckBounds(8, ~uint64_t{0} - 4, 64, 1), "");
  std::string why = BufferRegistry::CheckBounds(2, 4, 64, 4);
  EXPECT_NE(why.find("not a multiple of the element size 4"), std::string::npos) << why;
  why = BufferRegistry::CheckBounds(40, 32, 64, 4);
  EXPECT_NE(why.find("offset 40 + 32 bytes exceeds the region's 64 bytes"), std::string::npos)
      << why;
}

TEST(Registry, ResolveChecksOwnerAndBounds) {
  int released = 0;  // before the registry, which releases into it when destroyed
  BufferRegistry reg(false);
  std::string id = reg.Add(MakeRegion(1024, &released));
  RegionPin pin;
  char* p = nullptr;
  EXPECT_TRUE(reg.Resolve(kAnonymous, id, 16, 64, 4, &pin, &p).ok());
  EXPECT_EQ(pin.region()->inflight.load(), 1);
  RegionPin other;
  Status st = reg.Resolve("mallory", id, 0, 4, 4, &other, &p);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);  // someone else's buffer looks absent
  st = reg.Resolve(kAnonymous, id, 1020, 8, 4, &other, &p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(other.region(), nullptr);  // a failed resolve pins nothing
  EXPECT_EQ(reg.Resolve(kAnonymous, "buf-nope", 0, 4, 4, &other, &p).code(), StatusCode::kNotFound);
}

TEST(Registry, UnregisterInUseIsDeferredAndTwiceIsNotFound) {
  int released = 0;  // before the registry, which releases into it when destroyed
  BufferRegistry reg(false);
  std::string id = reg.Add(MakeRegion(1024, &released));
  RegionPin pin;
  char* p = nullptr;
  ASSERT_TRUE(reg.Resolve(kAnonymous, id, 0, 64, 4, &pin, &p).ok());
  bool deferred = false;
  ASSERT_TRUE(reg.Unregister(kAnonymous, id, &deferred).ok());
  EXPECT_TRUE(deferred);
  EXPECT_EQ(released, 0);  // the request still uses it
  EXPECT_EQ(reg.Unregister(kAnonymous, id, &deferred).code(), StatusCode::kNotFound);
  RegionPin again;
  EXPECT_EQ(reg.Resolve(kAnonymous, id, 0, 4, 4, &again, &p).code(), StatusCode::kNotFound);
  pin.Reset();
  EXPECT_EQ(released, 1);  // freed when the last request let go
}

TEST(Registry, LeasesExpireUnlessUsedOrRenewed) {
  int r1 = 0, r2 = 0, r3 = 0;  // before the registry, which releases into them when destroyed
  BufferRegistry reg(false);
  std::string a = reg.Add(MakeRegion(64, &r1, /*lease=*/1));
  std::string b = reg.Add(MakeRegion(64, &r2, /*lease=*/1));
  std::string c = reg.Add(MakeRegion(64, &r3, /*lease=*/0));
  RegionPin in_use;
  char* p = nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  std::shared_ptr<Region> renewed;
  ASSERT_TRUE(reg.Renew(kAnonymous, b, &renewed).ok());
  renewed.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(reg.ExpireLeases(), 1);  // a expired; b was renewed; c has no lease
  EXPECT_EQ(r1, 1);
  EXPECT_EQ(r2, 0);
  EXPECT_EQ(reg.size(), 2u);
  // A region in use is never expired under its request.
  ASSERT_TRUE(reg.Resolve(kAnonymous, b, 0, 4, 4, &in_use, &p).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(reg.ExpireLeases(), 0);
  in_use.Reset();
  EXPECT_EQ(reg.ExpireLeases(), 1);
  EXPECT_EQ(r2, 1);
  EXPECT_EQ(r3, 0);
}

TEST(Registry, ReleaseOwnerTakesOnlyThatOwnersBuffersDeferredWhilePinned) {
  int released = 0;  // before the registry, which releases into it when destroyed
  BufferRegistry reg(false);
  auto owned = [&](const char* owner) {
    auto r = MakeRegion(64, &released);
    r->owner = owner;
    return reg.Add(std::move(r));
  };
  const std::string a1 = owned("conn:1"), a2 = owned("conn:1"), b = owned("conn:2");
  RegionPin pin;
  char* p = nullptr;
  ASSERT_TRUE(reg.Resolve("conn:1", a1, 0, 64, 4, &pin, &p).ok());
  EXPECT_EQ(reg.ReleaseOwner("conn:1"), 2);
  EXPECT_EQ(released, 1);  // a2 at once; a1 when its request lets go
  EXPECT_EQ(reg.size(), 1u);
  RegionPin again;
  EXPECT_EQ(reg.Resolve("conn:1", a2, 0, 4, 4, &again, &p).code(), StatusCode::kNotFound);
  EXPECT_TRUE(reg.Resolve("conn:2", b, 0, 4, 4, &again, &p).ok());
  again.Reset();
  pin.Reset();
  EXPECT_EQ(released, 2);
  EXPECT_EQ(reg.ReleaseOwner("conn:1"), 0);
  EXPECT_EQ(reg.ReleaseOwner("conn:3"), 0);  // never held any
}

TEST(Registry, ConnectionsShareTheAnonymousQuotaAndAGoneOneCannotAdd) {
  int released = 0;
  BufferRegistry reg(false);
  bool alive = true;
  reg.SetOwnerAlive([&alive](const Principal& who) { return who != "conn:2" || alive; });
  const BufferQuota quota{0, 2};
  auto add = [&](const char* owner, std::string* id) {
    auto r = MakeRegion(64, &released);
    r->owner = owner;
    return reg.Add(std::move(r), quota, id);
  };
  std::string id;
  ASSERT_TRUE(add("conn:1", &id).ok());
  ASSERT_TRUE(add("conn:2", &id).ok());
  const Status over = add("conn:3", &id);
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("'anonymous' (every anonymous connection together)"),
            std::string::npos)
      << over.message();
  EXPECT_EQ(reg.UsageByPrincipal().at(kAnonymous).buffers, 2u);
  EXPECT_TRUE(add("token:alice", &id).ok());  // a principal of its own counts alone
  // conn:2's connection went: what it registers after its release is refused.
  alive = false;
  EXPECT_EQ(reg.ReleaseOwner("conn:2"), 1);
  EXPECT_EQ(add("conn:2", &id).code(), StatusCode::kUnavailable);
  EXPECT_EQ(reg.UsageByPrincipal().at(kAnonymous).buffers, 1u);
}

}  // namespace
}  // namespace kerneld::server
