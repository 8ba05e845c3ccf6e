// Clients follow replicas (docs/deploy.md "Scale-out"): a target that
// resolves to several daemons plus the round_robin policy spreads requests
// over all of them, through the C++ client and through kernelctl's global
// --lb option. Two real daemons on loopback stand in for the pods behind a
// headless Service; `ipv4:127.0.0.1:A,127.0.0.1:B` for the name with two
// addresses. Each daemon's own kerneld_requests_total says where requests went.
#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

int Ctl(const std::string& args, std::string* out, const std::string& env = "") {
  return RunCapture(env + std::string(KERNELCTL_BINARY) + " " + args, out);
}

// Requests daemon `d` answered OK for op scale.
double ScaleOk(const Daemon& d) {
  return SeriesValue(d.Metrics(), "kerneld_requests_total", {"op=\"scale\"", "code=\"OK\""})
      .value_or(0);
}

// The two daemons' counts once they add up to `total`: a daemon counts a
// request as it answers it, which may be a moment after the client got the
// answer. Gives up after 5 s (the test then fails on the sum).
std::pair<double, double> Counts(const Daemon& a, const Daemon& b, double total) {
  std::pair<double, double> n;
  for (int i = 0; i < 250; ++i) {
    n = {ScaleOk(a), ScaleOk(b)};
    if (n.first + n.second >= total) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return n;
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
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    v1::ExecuteResponse resp;
    grpc::Status st = c.Execute(ScaleRequest(DType::kFloat32, {16}, 2.0), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const auto [na, nb] = Counts(a, b, kRequests);
  std::printf("client round_robin: daemon a %g, daemon b %g of %d requests\n", na, nb, kRequests);
  EXPECT_EQ(na + nb, kRequests);
  // round_robin alternates once both subchannels are ready; the requests
  // sent before the second connected all went to the first (a few ms: on a
  // loaded machine, dozens of requests).
  EXPECT_GE(na, kRequests / 10) << "a=" << na << " b=" << nb;
  EXPECT_GE(nb, kRequests / 10) << "a=" << na << " b=" << nb;
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
  ASSERT_EQ(Ctl("--target " + target +
                    " --lb round_robin run scale --shape 16 --attr factor=2 --repeat 200",
                &out),
            0)
      << out;
  const auto [na, nb] = Counts(a, b, 200);
  std::printf("kernelctl --lb round_robin: daemon a %g, daemon b %g of 200 requests\n", na, nb);
  EXPECT_EQ(na + nb, 200) << out;
  EXPECT_GE(na, 20) << "a=" << na << " b=" << nb;
  EXPECT_GE(nb, 20) << "a=" << na << " b=" << nb;
  // Without --lb (pick_first) one daemon takes every request.
  ASSERT_EQ(Ctl("--target " + target + " run scale --shape 16 --attr factor=2 --repeat 200", &out),
            0)
      << out;
  const auto [ta, tb] = Counts(a, b, 400);
  const double da = ta - na, db = tb - nb;
  std::printf("kernelctl (pick_first): daemon a %g, daemon b %g of 200 requests\n", da, db);
  EXPECT_TRUE((da == 200 && db == 0) || (da == 0 && db == 200)) << "a+" << da << " b+" << db;
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(b.Terminate(), 0);
}

// kernelctl perf opens its own connections; the global --lb applies to them
// too (it used to be ignored there: one daemon took the whole load).
TEST(LoadBalance, KernelctlPerfFollowsLb) {
  Daemon a({}, false), b({}, false);
  ASSERT_TRUE(a.ok()) << a.Log();
  ASSERT_TRUE(b.ok()) << b.Log();
  std::string out;
  ASSERT_EQ(Ctl("--target " + TwoAddresses(a, b) +
                    " --lb round_robin perf scale --shape 16 --attr factor=2 --concurrency 1 "
                    "--window-ms 100 --max-windows 3",
                &out),
            0)
      << out;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double na = ScaleOk(a), nb = ScaleOk(b);
  std::printf("kernelctl --lb round_robin perf: daemon a %g, daemon b %g\n", na, nb);
  EXPECT_GE(na, 10) << "a=" << na << " b=" << nb << "\n" << out;
  EXPECT_GE(nb, 10) << "a=" << na << " b=" << nb << "\n" << out;
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(b.Terminate(), 0);
}

TEST(LoadBalance, KernelctlDnsTargetAndBadPolicy) {
  Daemon a({}, false);
  ASSERT_TRUE(a.ok()) << a.Log();
  std::string out;
  // dns:/// as a headless Service's name is used (here localhost: may also
  // resolve to ::1, where nothing listens; round_robin uses what connects).
  // Sanitized, with gRPC's getaddrinfo resolver: its default, c-ares (the
  // system's libcares), leaks 10 bytes once per process, which LeakSanitizer
  // reports at kernelctl's exit.
  EXPECT_EQ(Ctl("--target dns:///localhost:" + Port(a.target()) + " --lb round_robin health", &out,
                kSanitized ? "GRPC_DNS_RESOLVER=native " : ""),
            0)
      << out;
  EXPECT_NE(out.find("SERVING"), std::string::npos) << out;
  EXPECT_EQ(Ctl("--target " + a.target() + " --lb random health", &out), 2) << out;
  EXPECT_NE(out.find("unknown load-balancing policy 'random'"), std::string::npos) << out;
  EXPECT_EQ(a.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
