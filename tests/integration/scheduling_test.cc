// The scheduler through the real daemon on the CPU (docs/architecture.md,
// "Scheduling"): the online tuner finds the faster of _test_two_speed's
// implementations within its exploration bound and keeps it across a
// restart through --tuning_file; and a principal flooding the CPU queue
// does not stretch another principal's latency (round robin within a
// priority).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

using client::KernelClient;

v1::ExecuteRequest TwoSpeedRequest() {
  auto req = ScaleRequest(DType::kFloat32, {64}, 1.0);
  req.set_op("_test_two_speed");
  req.mutable_attrs()->clear();  // fast_ms 0.3, slow_ms 3 (the defaults)
  return req;
}

std::string TempDir() {
  char tmpl[] = "/tmp/kerneld-tuning-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(Tuning, OnlinePicksTheFasterWithinTheBoundAndKeepsItAcrossARestart) {
  const std::string dir = TempDir();
  const std::string file = dir + "/tuning";
  const std::vector<std::string> flags = {"--enable_test_ops", "--tuning=online",
                                          "--tuning_file=" + file, "--tuning_explore_runs=3",
                                          "--tuning_recheck_every=0"};
  constexpr int kBound = 2 * (1 + 3);  // impls x (a warm-up + explore runs)
  {
    Daemon d(flags);
    std::vector<std::string> backends;
    for (int i = 0; i < 30; ++i) {
      v1::ExecuteResponse resp;
      ASSERT_TRUE(d.client().Execute(TwoSpeedRequest(), &resp).ok());
      ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
      backends.push_back(resp.info().backend());
    }
    // Statically _test_slow ranks first; it ran only while being explored.
    EXPECT_EQ(backends[0], "_test_slow");
    EXPECT_EQ(std::count(backends.begin(), backends.end(), "_test_slow"), 4);
    for (int i = kBound; i < 30; ++i) EXPECT_EQ(backends[static_cast<size_t>(i)], "cpu") << i;
    const std::string m = d.Metrics();
    EXPECT_EQ(SeriesValue(m, "kerneld_tuning_decisions_total", {"kind=\"explore\""}), kBound);
    EXPECT_EQ(SeriesValue(m, "kerneld_tuning_decisions_total", {"kind=\"tuned\""}), 30 - kBound);
    EXPECT_EQ(SeriesValue(m, "kerneld_tuning_table_buckets", {}), 1);
    // The cost: the slow runs' time beyond 4 fast runs, about 4 x 2.7 ms.
    const auto cost = SeriesValue(m, "kerneld_tuning_exploration_seconds_total", {});
    ASSERT_TRUE(cost.has_value());
    EXPECT_GT(*cost, 0.003);
    EXPECT_LT(*cost, 0.1);
    // ListKernels shows the bucket, its choice and both medians.
    v1::ListKernelsResponse lk;
    ASSERT_TRUE(d.client().ListKernels(&lk, "_test_two_speed").ok());
    ASSERT_EQ(lk.kernels_size(), 1);
    ASSERT_EQ(lk.kernels(0).tuning_size(), 1);
    const v1::TuningBucket& b = lk.kernels(0).tuning(0);
    EXPECT_EQ(b.chosen(), "cpu");
    EXPECT_EQ(b.bucket(), "numel<=64");
    EXPECT_EQ(b.dtypes(), "float32");
    ASSERT_EQ(b.times_size(), 2);
    int64_t slow = 0, fast = 0;
    for (const auto& t : b.times()) (t.backend() == "cpu" ? fast : slow) = t.median_ns();
    EXPECT_GT(slow, 3 * fast);
    EXPECT_EQ(d.Terminate(), 0);  // writes the table
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << "no tuning file written";
  {
    Daemon d(flags);
    for (int i = 0; i < 10; ++i) {
      v1::ExecuteResponse resp;
      ASSERT_TRUE(d.client().Execute(TwoSpeedRequest(), &resp).ok());
      EXPECT_EQ(resp.info().backend(), "cpu") << i;
    }
    const std::string m = d.Metrics();
    EXPECT_EQ(SeriesValue(m, "kerneld_tuning_decisions_total", {"kind=\"explore\""}), 0);
    EXPECT_NE(d.Log().find("2 rows loaded"), std::string::npos) << d.Log();
  }
  // A file measured elsewhere is ignored, with a log line, and explored anew.
  {
    std::string text;
    {
      std::ifstream f(file);
      text.assign(std::istreambuf_iterator<char>(f), {});
    }
    const size_t stamp = text.find("stamp\t");
    ASSERT_NE(stamp, std::string::npos);
    text.insert(stamp + 6, "0.0.0-other+");
    std::ofstream(file, std::ios::trunc) << text;
    Daemon d(flags);
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(TwoSpeedRequest(), &resp).ok());
    EXPECT_EQ(resp.info().backend(), "_test_slow");  // exploring again
    EXPECT_NE(d.Log().find("ignored: it was measured with version 0.0.0-other+"), std::string::npos)
        << d.Log();
  }
  std::remove(file.c_str());
  rmdir(dir.c_str());
}

// ---- fair share --------------------------------------------------------

const std::string kFlooder = "flooder-token-0123456789abcdef";
const std::string kTrickle = "trickle-token-0123456789abcdef";

std::unique_ptr<KernelClient> As(const Daemon& d, const std::string& token) {
  client::ClientSecurity s;
  s.token = token;
  return std::make_unique<KernelClient>(d.target(),
                                        client::ClientOptions(256, std::chrono::seconds(30), s));
}

v1::ExecuteRequest Sleep(double ms) {
  auto req = ScaleRequest(DType::kFloat32, {16}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  return req;
}

// The daemon's time for each of n sequential requests (total_ns: arrival
// to response, so the clients' own scheduling on a shared machine does not
// count), sorted.
std::vector<int64_t> Latencies(KernelClient& c, const v1::ExecuteRequest& req, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    v1::ExecuteResponse resp;
    EXPECT_TRUE(c.Execute(req, &resp).ok());
    EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
    out.push_back(resp.info().total_ns());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t P99(const std::vector<int64_t>& sorted) { return sorted[sorted.size() * 99 / 100]; }

TEST(FairShare, AFloodingPrincipalDoesNotStretchAnothersLatency) {
  const std::string dir = TempDir();
  const std::string tokens = dir + "/tokens";
  std::ofstream(tokens) << kFlooder << " flooder user\n" << kTrickle << " trickle user\n";
  // Two CPU workers; nothing runs inline, so every request meets the queue.
  Daemon d({"--enable_test_ops", "--auth_tokens=" + tokens, "--cpu_workers=2", "--inline_max_kb=-1",
            "--quota_inflight=0"});
  auto trickle = As(d, kTrickle);
  // Long enough that the daemon's and the clients' CPU time (two shared
  // cores) is small beside them: the queue decides the latency.
  const v1::ExecuteRequest mine = Sleep(8), theirs = Sleep(4);
  Latencies(*trickle, mine, 5);  // warm the connection
  const std::vector<int64_t> unloaded = Latencies(*trickle, mine, 50);

  // The flood: 16 requests of 4 ms always in flight, 8 per worker: first
  // come, first served, a request arriving behind them would wait ~28 ms
  // (x4.5 the trickle's 8 ms); taking turns, at most one flood request.
  constexpr int kFloodThreads = 16;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> flooded{0}, flood_ns{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < kFloodThreads; ++t)
    flood.emplace_back([&] {
      auto c = As(d, kFlooder);
      while (!stop.load()) {
        v1::ExecuteResponse resp;
        const auto t0 = std::chrono::steady_clock::now();
        if (c->Execute(theirs, &resp).ok() && resp.status().code() == 0) {
          flood_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
          ++flooded;
        }
      }
    });
  // Measure once the flood is established (a condition, with a deadline).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (flooded.load() < 100 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_GE(flooded.load(), 100) << "the flood never got going";
  const int64_t before = flooded.load(), before_ns = flood_ns.load();
  const std::vector<int64_t> loaded = Latencies(*trickle, mine, 50);
  const double flood_mean_ms =
      static_cast<double>(flood_ns.load() - before_ns) / (flooded.load() - before) * 1e-6;
  stop = true;
  for (auto& t : flood) t.join();

  const double ratio = static_cast<double>(P99(loaded)) / static_cast<double>(P99(unloaded));
  std::printf(
      "trickle p99 unloaded %.2f ms, under the flood %.2f ms (x%.2f); flood requests "
      "took %.1f ms on average\n",
      P99(unloaded) * 1e-6, P99(loaded) * 1e-6, ratio, flood_mean_ms);
  // The flood really queued: its own requests waited for many others, so
  // first come, first served would have put the trickle behind them too.
  EXPECT_GT(flood_mean_ms, 20.0);
  EXPECT_LE(ratio, 2.0);
  std::remove(tokens.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace kerneld::testing
