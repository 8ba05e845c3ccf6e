// SIGTERM after cancelled ExecuteStreams, on both gRPC APIs: streams
// cancelled by their clients at every stage (the request queued, running,
// its answer written but not read) leave nothing in flight, the drain has
// nothing to wait for, and the daemon exits promptly.
//
// What this guards: an 8 MiB answer the client never reads fills the
// connection's socket, and gRPC's TCP then starts its backup poller, which
// polls for up to 10 s on one of gRPC's executor threads. gRPC's library
// clean-up (grpc_shutdown, run by ~grpc::Server) joins that thread, so the
// daemon logged "stopped" and exited up to 10 s later, on either API
// (server/main.cc keeps gRPC initialized until the process exits). Whether
// the poller is still polling at exit is a race; each round has it, and the
// rounds alternate the unread answer between the connection of the other
// streams and one of its own (the callback API loses it more often on the
// latter, the sync API on the former), so the old daemon failed within a
// few rounds on both APIs.
#include <chrono>
#include <regex>
#include <thread>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

using Clock = std::chrono::steady_clock;

v1::ExecuteRequest SleepRequest(double ms, const std::string& id) {
  auto req = ScaleRequest(DType::kFloat32, {16}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  req.set_backend("cpu");
  req.set_request_id(id);
  return req;
}

// Polls `pred` (a condition of the daemon, never a sleep) for up to `limit`.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// The number `field` of the daemon's last JSON log line of `event`
// (--log_format=json); -1 when absent.
double LoggedField(const std::string& log, const std::string& event, const std::string& field) {
  const size_t at = log.rfind("\"event\":\"" + event + "\"");
  if (at == std::string::npos) return -1;
  const size_t eol = log.find('\n', at);
  const std::string line = log.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + field + "\":([0-9.]+)"))) return -1;
  return std::stod(m[1].str());
}

bool Logged(const std::string& log, const std::string& event) {
  return log.find("\"event\":\"" + event + "\"") != std::string::npos;
}

// SIGTERM to exit once nothing is in flight: the drain, the answers' flush
// and gRPC's shutdown grace (1 s at most), with room for a loaded machine;
// well below the 10 s of gRPC's backup poller.
constexpr auto kExitBound = std::chrono::milliseconds(4000);
// A drain that waits on a leaked in-flight request or stream ends here,
// logs drain_timeout and exits past kExitBound.
constexpr int kDrainTimeoutS = 5;

std::vector<std::string> Flags(const std::string& api) {
  // One CPU worker, nothing run on gRPC's threads: the second sleep waits in
  // the queue behind the first.
  return {"--grpc_api=" + api, "--enable_test_ops",
          "--cpu_workers=1",   "--inline_max_kb=-1",
          "--log_format=json", "--drain_timeout_s=" + std::to_string(kDrainTimeoutS)};
}

// SIGTERM; the exit status, and how long the exit took.
int TerminateTimed(Daemon& d, Clock::duration* took) {
  const auto t0 = Clock::now();
  const int rc = d.Terminate(std::chrono::seconds(30));
  *took = Clock::now() - t0;
  return rc;
}

int64_t Ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

class CancelledStreamExit : public ::testing::TestWithParam<std::string> {};

// Streams cancelled at every stage, then SIGTERM: before the signal nothing
// runs, waits or is counted in flight; the drain neither waits on a leaked
// count nor times out, and the daemon exits 0 within kExitBound, round
// after round.
TEST_P(CancelledStreamExit, ExitsPromptlyAfterStreamsCancelledAtEveryStage) {
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Daemon d(Flags(GetParam()));
    ASSERT_TRUE(d.ok()) << d.Log();
    auto metric = [&](const std::string& name) {
      return SeriesValue(d.Metrics(), name, {}).value_or(-1);
    };
    auto scaled = [&] {
      return SeriesValue(d.Metrics(), "kerneld_requests_total", {"op=\"scale\"", "code=\"OK\""})
          .value_or(0);
    };

    // Answered, not read: a small answer (taken in by the client's
    // transport), and an 8 MiB one that fills the socket, on the shared
    // connection or (odd rounds) on a connection of its own.
    auto small = d.client().OpenStream();
    ASSERT_TRUE(small->Send(ScaleRequest(DType::kFloat32, {64}, 2.0)));
    ASSERT_TRUE(Eventually([&] { return scaled() == 1; })) << d.Metrics();
    client::KernelClient own(d.target());
    auto large = (round % 2 ? own : d.client()).OpenStream();
    ASSERT_TRUE(large->Send(ScaleRequest(DType::kFloat32, {2 << 20}, 2.0)));
    ASSERT_TRUE(Eventually([&] { return scaled() == 2; })) << d.Metrics();
    // Running, and queued behind it. Both streams open first: a stream
    // the sync API has yet to give a thread could reach the daemon after
    // the 300 ms sleep ends, on a loaded machine, and never queue.
    auto running = d.client().OpenStream();
    auto queued = d.client().OpenStream();
    ASSERT_TRUE(running->Send(SleepRequest(300, "running")));
    ASSERT_TRUE(Eventually([&] { return metric("kerneld_inflight_requests") == 1; }))
        << d.Metrics();
    ASSERT_TRUE(queued->Send(SleepRequest(300, "queued")));
    ASSERT_TRUE(Eventually([&] { return metric("kerneld_queue_depth") == 1; })) << d.Metrics();

    for (auto* s : {&small, &large, &running, &queued}) (*s)->Cancel();
    for (auto* s : {&small, &large, &running, &queued})
      EXPECT_EQ((*s)->Finish().error_code(), grpc::StatusCode::CANCELLED);
    // Nothing left: the running sleep ends, the queued one is cancelled
    // without running, and no principal counts a request in flight.
    EXPECT_TRUE(Eventually([&] {
      const std::string m = d.Metrics();
      return SeriesValue(m, "kerneld_inflight_requests", {}) == 0.0 &&
             SeriesValue(m, "kerneld_queue_depth", {}) == 0.0 &&
             SeriesValue(m, "kerneld_principal_with_requests_inflight", {}).value_or(0) == 0.0;
    })) << d.Metrics();
    ASSERT_TRUE(d.Serving()) << d.Log();

    Clock::duration took;
    const int rc = TerminateTimed(d, &took);
    const std::string log = d.Log();
    EXPECT_EQ(rc, 0) << log;
    EXPECT_LT(took, kExitBound) << "exit took " << Ms(took) << " ms\n" << log;
    EXPECT_FALSE(Logged(log, "drain_timeout")) << log;
    EXPECT_TRUE(Logged(log, "stopped")) << log;
    // The drain had nothing leaked to wait for.
    EXPECT_GE(LoggedField(log, "drained", "drain_ms"), 0) << log;
    EXPECT_LT(LoggedField(log, "drained", "drain_ms"), 1000 * kDrainTimeoutS) << log;
  }
}

// SIGTERM right after the cancellations, while the cancelled sleep still
// runs: the drain waits for it (it holds the worker), then the daemon exits
// within kExitBound of it.
TEST_P(CancelledStreamExit, ExitsPromptlyWhenSigtermFollowsTheCancel) {
  Daemon d(Flags(GetParam()));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto metric = [&](const std::string& name) {
    return SeriesValue(d.Metrics(), name, {}).value_or(-1);
  };
  auto small = d.client().OpenStream();
  ASSERT_TRUE(small->Send(ScaleRequest(DType::kFloat32, {64}, 2.0)));
  ASSERT_TRUE(Eventually([&] {
    return SeriesValue(d.Metrics(), "kerneld_requests_total", {"op=\"scale\"", "code=\"OK\""})
               .value_or(0) == 1;
  })) << d.Metrics();
  // Opened before the sleep starts (as in the test above), and the small
  // answer counted first, so that the in-flight request seen is the sleep.
  auto running = d.client().OpenStream();
  auto queued = d.client().OpenStream();
  ASSERT_TRUE(running->Send(SleepRequest(300, "running")));
  ASSERT_TRUE(Eventually([&] { return metric("kerneld_inflight_requests") == 1; })) << d.Metrics();
  ASSERT_TRUE(queued->Send(SleepRequest(300, "queued")));
  ASSERT_TRUE(Eventually([&] { return metric("kerneld_queue_depth") == 1; })) << d.Metrics();
  for (auto* s : {&small, &running, &queued}) (*s)->Cancel();
  for (auto* s : {&small, &running, &queued}) (void)(*s)->Finish();

  Clock::duration took;
  const int rc = TerminateTimed(d, &took);
  const std::string log = d.Log();
  EXPECT_EQ(rc, 0) << log;
  // The 300 ms sleep may still run when the signal lands.
  EXPECT_LT(took, kExitBound + std::chrono::milliseconds(300))
      << "exit took " << Ms(took) << " ms\n"
      << log;
  EXPECT_FALSE(Logged(log, "drain_timeout")) << log;
}

INSTANTIATE_TEST_SUITE_P(Apis, CancelledStreamExit, ::testing::Values("callback", "sync"));

}  // namespace
}  // namespace kerneld::testing
