// Shutdown as clients see it: during a drain every call is answered OK or
// UNAVAILABLE (never CANCELLED), clients that keep calling do not hold the
// exit (it follows the last in-flight request), open streams end
// UNAVAILABLE, and an idle daemon with metrics on exits at once (civetweb's
// stop used to hold exit for up to 2 s).
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

using Clock = std::chrono::steady_clock;

// A client calling every `period` on its own connection until told to stop,
// whatever it is answered (a retrying client does not stop at UNAVAILABLE).
class PeriodicClient {
 public:
  PeriodicClient(const std::string& target, std::chrono::milliseconds period)
      : client_(target), thread_([this, period] {
          auto req = ScaleRequest(DType::kFloat32, {16}, 2.0);
          for (auto next = Clock::now(); !stop_.load(); next += period) {
            v1::ExecuteResponse resp;
            grpc::Status st = client_.Execute(req, &resp, std::chrono::milliseconds(10000));
            {
              std::lock_guard<std::mutex> lock(mu_);
              ++codes_[st.error_code()];
              if (st.error_code() != grpc::StatusCode::OK &&
                  st.error_code() != grpc::StatusCode::UNAVAILABLE)
                bad_.push_back(std::to_string(st.error_code()) + " " + st.error_message());
            }
            ok_.fetch_add(st.ok());
            std::this_thread::sleep_until(next + period);  // the client's pace
          }
        }) {}
  ~PeriodicClient() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int ok() const { return ok_.load(); }
  std::map<grpc::StatusCode, int> codes() {
    std::lock_guard<std::mutex> lock(mu_);
    return codes_;
  }
  std::vector<std::string> bad() {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_;
  }

 private:
  client::KernelClient client_;
  std::atomic<bool> stop_{false};
  std::atomic<int> ok_{0};
  std::mutex mu_;
  std::map<grpc::StatusCode, int> codes_;
  std::vector<std::string> bad_;
  std::thread thread_;  // last: starts once the rest is built
};

// Requests executing on the daemon's devices now (kerneld_inflight_requests).
double DeviceInflight(const Daemon& d) {
  return SeriesValue(d.Metrics(), "kerneld_inflight_requests", {"device=\"cpu\""}).value_or(0);
}

// One SIGTERM with clients calling every `period` (two connections), one
// request of 500 ms in flight and one idle ExecuteStream open: every call
// and the stream end OK or UNAVAILABLE, health turns NOT_SERVING while the
// request runs, and the daemon exits soon after that request is answered
// (the clients, which never stop calling, do not hold it; the drain timeout
// is the default 30 s).
class DrainContract : public ::testing::TestWithParam<int> {};

TEST_P(DrainContract, OkOrUnavailableAndExitFollowsTheLastRequest) {
  const auto period = std::chrono::milliseconds(GetParam());
  constexpr int kRuns = 20;
  std::map<grpc::StatusCode, int> seen;
  double worst_exit_after_last_s = 0, worst_exit_after_term_s = 0;
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    Daemon d({"--enable_test_ops", "--cpu_workers=2"});
    ASSERT_TRUE(d.ok()) << d.Log();
    // An ExecuteStream that answered one request and then sits idle.
    client::KernelClient streamer(d.target());
    grpc::ClientContext stream_ctx;
    auto stream = streamer.stub()->ExecuteStream(&stream_ctx);
    ASSERT_TRUE(stream->Write(ScaleRequest(DType::kFloat32, {16}, 2.0)));
    v1::ExecuteResponse first;
    ASSERT_TRUE(stream->Read(&first));
    ASSERT_EQ(first.status().code(), 0) << first.status().message();

    PeriodicClient a(d.target(), period), b(d.target(), period);
    while (a.ok() == 0 || b.ok() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));

    // The last in-flight request: 500 ms on the CPU.
    grpc::Status long_status;
    Clock::time_point long_done;
    std::atomic<bool> long_finished{false};
    std::thread long_call([&] {
      client::KernelClient c(d.target());
      v1::ExecuteResponse resp;
      long_status = c.Execute(SleepRequest(500), &resp, std::chrono::milliseconds(20000));
      long_done = Clock::now();
      long_finished.store(true);
    });
    while (DeviceInflight(d) < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));

    const auto term_at = Clock::now();
    int exit_code = -2;
    Clock::time_point exited;
    std::thread term([&] {
      exit_code = d.Terminate(std::chrono::seconds(60));
      exited = Clock::now();
    });
    // Health turns NOT_SERVING at the start of the drain, while the long
    // request still runs.
    client::KernelClient prober(d.target());
    bool serving = true;
    for (;;) {
      grpc::Status st = prober.Health("", &serving);
      if (!st.ok() || !serving) break;
    }
    EXPECT_FALSE(serving);
    EXPECT_FALSE(long_finished.load()) << "health was still SERVING after the drain's end";

    // The idle stream ends UNAVAILABLE (not CANCELLED) without closing it.
    v1::ExecuteResponse extra;
    EXPECT_FALSE(stream->Read(&extra));
    grpc::Status stream_status = stream->Finish();
    EXPECT_EQ(stream_status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << stream_status.error_message();

    long_call.join();
    term.join();
    a.Stop();
    b.Stop();
    EXPECT_EQ(exit_code, 0) << d.Log();
    EXPECT_TRUE(long_status.ok()) << long_status.error_code() << " " << long_status.error_message();
    for (auto* c : {&a, &b}) {
      for (const auto& m : c->bad()) ADD_FAILURE() << "a call ended " << m;
      for (const auto& [code, n] : c->codes()) seen[code] += n;
    }
    const double after_last = std::chrono::duration<double>(exited - long_done).count();
    const double after_term = std::chrono::duration<double>(exited - term_at).count();
    worst_exit_after_last_s = std::max(worst_exit_after_last_s, after_last);
    worst_exit_after_term_s = std::max(worst_exit_after_term_s, after_term);
    // Functional bounds: the drain timeout is 30 s; the request ran 0.5 s.
    EXPECT_LT(after_last, 2.5) << "exit waited for the clients, not the last request";
    EXPECT_LT(after_term, 5.0);
  }
  for (const auto& [code, n] : seen) std::printf("status %d: %d calls\n", code, n);
  std::printf("exit after the last request: at most %.3f s; after SIGTERM: at most %.3f s\n",
              worst_exit_after_last_s, worst_exit_after_term_s);
  EXPECT_GT(seen[grpc::StatusCode::UNAVAILABLE], 0) << "no call reached the drain";
}

INSTANTIATE_TEST_SUITE_P(Drain, DrainContract, ::testing::Values(10, 100),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ms";
                         });

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
