// Clients follow replicas (docs/deploy.md "Scale-out"): a target that
// resolves to several daemons plus the round_robin policy spreads requests
// over all of them, through the C++ client and through kernelctl's global
// --lb option. Two real daemons on loopback stand in for the pods behind a
// headless Service; `ipv4:127.0.0.1:A,127.0.0.1:B` for the name with two
// addresses. Each daemon's own kerneld_requests_total says where requests went.
#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

int Ctl(const std::string& args, std::string* out) {
  return RunCapture(std::string(KERNELCTL_BINARY) + " " + args, out);
}

// Requests daemon `d` answered OK for op scale.
double ScaleOk(const Daemon& d) {
  return SeriesValue(d.Metrics(), "kerneld_requests_total", {"op=\"scale\"", "code=\"OK\""})
      .value_or(0);
}

std::string Port(const std::string& target) { return target.substr(target.rfind(':') + 1); }

// "ipv4:127.0.0.1:A,127.0.0.1:B": gRPC's static resolver, two addresses.
std::string TwoAddresses(const Daemon& a, const Daemon& b) {
  return "ipv4:127.0.0.1:" + Port(a.target()) + ",127.0.0.1:" + Port(b.target());
}

TEST(LoadBalance, ClientRoundRobinSpreadsOverBothDaemons) {
  Daemon a({}, false), b({}, false);
  ASSERT_TRUE(a.ok()) << a.Log();
  ASSERT_TRUE(b.ok()) << b.Log();
  client::ClientOptions o;
  o.lb_policy = "round_robin";
  o.default_timeout = std::chrono::milliseconds(10000);
  client::KernelClient c(TwoAddresses(a, b), o);
  constexpr int kRequests = 40;
  for (int i = 0; i < kRequests; ++i) {
    v1::ExecuteResponse resp;
    grpc::Status st = c.Execute(ScaleRequest(DType::kFloat32, {16}, 2.0), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const double na = ScaleOk(a), nb = ScaleOk(b);
  EXPECT_EQ(na + nb, kRequests);
  // round_robin alternates once both subchannels are ready; the first few
  // may all go to the one that connected first.
  EXPECT_GE(na, kRequests / 4) << "a=" << na << " b=" << nb;
  EXPECT_GE(nb, kRequests / 4) << "a=" << na << " b=" << nb;
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(b.Terminate(), 0);
}

TEST(LoadBalance, KernelctlLbRoundRobinVersusPickFirst) {
  Daemon a({}, false), b({}, false);
  ASSERT_TRUE(a.ok()) << a.Log();
  ASSERT_TRUE(b.ok()) << b.Log();
  const std::string target = TwoAddresses(a, b);
  std::string out;
  // The command docs/deploy.md shows.
  ASSERT_EQ(Ctl("--target " + target + " --lb round_robin run scale --shape 16 --attr factor=2 --repeat 40",
                &out),
            0)
      << out;
  const double na = ScaleOk(a), nb = ScaleOk(b);
  EXPECT_EQ(na + nb, 40) << out;
  EXPECT_GE(na, 10) << "a=" << na << " b=" << nb;
  EXPECT_GE(nb, 10) << "a=" << na << " b=" << nb;
  // Without --lb (pick_first) one daemon takes every request.
  ASSERT_EQ(Ctl("--target " + target + " run scale --shape 16 --attr factor=2 --repeat 40", &out), 0) << out;
  const double da = ScaleOk(a) - na, db = ScaleOk(b) - nb;
  EXPECT_TRUE((da == 40 && db == 0) || (da == 0 && db == 40)) << "a+" << da << " b+" << db;
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(b.Terminate(), 0);
}

TEST(LoadBalance, KernelctlDnsTargetAndBadPolicy) {
  Daemon a({}, false);
  ASSERT_TRUE(a.ok()) << a.Log();
  std::string out;
  // dns:/// as a headless Service's name is used (here localhost: may also
  // resolve to ::1, where nothing listens; round_robin uses what connects).
  EXPECT_EQ(Ctl("--target dns:///localhost:" + Port(a.target()) + " --lb round_robin health", &out), 0)
      << out;
  EXPECT_NE(out.find("SERVING"), std::string::npos) << out;
  EXPECT_EQ(Ctl("--target " + a.target() + " --lb random health", &out), 2) << out;
  EXPECT_NE(out.find("unknown load-balancing policy 'random'"), std::string::npos) << out;
  EXPECT_EQ(a.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
