// Shutdown as clients see it: during a drain every call is answered OK or
// UNAVAILABLE (never CANCELLED), and an idle daemon with metrics on exits
// at once (civetweb's stop used to hold exit for up to 2 s).
#include <atomic>
#include <map>
#include <mutex>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

v1::ExecuteRequest SleepRequest(double ms) {
  auto req = ScaleRequest(DType::kFloat32, {256}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  req.set_backend("cpu");
  return req;
}

TEST(Drain, EveryCallIsAnsweredOkOrUnavailable) {
  constexpr int kRounds = 10, kThreads = 24;
  std::map<std::string, int> seen;  // status code name -> count, over all rounds
  for (int round = 0; round < kRounds; ++round) {
    Daemon d({"--enable_test_ops", "--cpu_workers=4"});
    ASSERT_TRUE(d.ok()) << d.Log();
    // Two connections, as a client pool would have.
    client::KernelClient a(d.target()), b(d.target());
    std::mutex mu;
    std::vector<grpc::Status> bad;
    std::atomic<int> calls{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        client::KernelClient& c = t % 2 ? a : b;
        const auto req = SleepRequest(5 + t % 7);
        for (;;) {
          v1::ExecuteResponse resp;
          grpc::Status st = c.Execute(req, &resp, std::chrono::milliseconds(30000));
          ++calls;
          std::lock_guard<std::mutex> lock(mu);
          ++seen[std::to_string(st.error_code())];
          if (st.error_code() != grpc::StatusCode::OK &&
              st.error_code() != grpc::StatusCode::UNAVAILABLE)
            bad.push_back(st);
          if (!st.ok()) return;  // drained (or gone): this client stops
        }
      });
    }
    while (calls.load() < 2 * kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
    for (auto& th : threads) th.join();
    for (const auto& st : bad)
      ADD_FAILURE() << "round " << round << ": code " << st.error_code() << " "
                    << st.error_message();
  }
  for (const auto& [code, n] : seen) std::printf("status %s: %d calls\n", code.c_str(), n);
}

TEST(Drain, IdleDaemonWithMetricsExitsPromptly) {
  for (int i = 0; i < 3; ++i) {
    Daemon d;  // the fixture serves metrics on a free port
    ASSERT_TRUE(d.ok()) << d.Log();
    ASSERT_GT(d.metrics_port(), 0);
    ASSERT_TRUE(d.Serving());
    ASSERT_NE(d.Metrics().find("kerneld_"), std::string::npos);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("exit took %.3f s\n", s);
    // A functional bound, not a benchmark: the old exit took 1.5-2 s.
    EXPECT_LT(s, 1.0) << d.Log();
  }
}

}  // namespace
}  // namespace kerneld::testing
