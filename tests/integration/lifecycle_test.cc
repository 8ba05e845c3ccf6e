// Daemon lifecycle and back-pressure: SIGTERM drains in-flight work, a taken
// port fails loudly, a full queue answers RESOURCE_EXHAUSTED, a request past
// its deadline is not executed.
#include <atomic>
#include <future>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

int CountLines(const std::string& log, const std::string& needle) {
  int n = 0;
  for (size_t p = 0; (p = log.find(needle, p)) != std::string::npos; p += needle.size()) ++n;
  return n;
}

v1::ExecuteRequest SleepRequest(double ms, const std::string& id = "") {
  auto req = ScaleRequest(DType::kFloat32, {1024}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  req.set_request_id(id);
  req.set_backend("cpu");  // the CPU worker's queue, also on a GPU machine
  return req;
}

TEST(Lifecycle, SigtermFinishesInFlightRequests) {
  Daemon d({"--cpu_workers=1", "--log_level=3", "--enable_test_ops"});
  ASSERT_TRUE(d.ok()) << d.Log();
  constexpr int kRequests = 6;
  std::atomic<int> done{0};
  std::vector<std::future<grpc::Status>> results;
  for (int i = 0; i < kRequests; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      auto req = SleepRequest(150, std::to_string(i));
      v1::ExecuteResponse resp;
      grpc::Status st = d.client().Execute(req, &resp);
      if (st.ok() && resp.outputs().at("y").inline_data() != req.inputs().at("x").inline_data())
        st = grpc::Status(grpc::StatusCode::DATA_LOSS, "wrong output");
      ++done;
      return st;
    }));
  }
  // Wait until the daemon has accepted every request (level 3 logs each one
  // when it is queued), then ask it to stop: ~6 x 150 ms of work remain.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (CountLines(d.Log(), "kerneld: start id=") < kRequests && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(CountLines(d.Log(), "kerneld: start id="), kRequests) << d.Log();
  EXPECT_LT(done.load(), kRequests - 2) << "requests finished too fast to test draining";
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
  for (auto& f : results) {
    grpc::Status st = f.get();
    EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  }
  EXPECT_EQ(done.load(), kRequests);
  EXPECT_NE(d.Log().find("SIGTERM received"), std::string::npos);
}

TEST(Lifecycle, TestOpsHiddenByDefault) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ExecuteResponse resp;
  EXPECT_EQ(d.client().Execute(SleepRequest(1), &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListKernelsResponse lk;
  ASSERT_TRUE(d.client().ListKernels(&lk).ok());
  for (const auto& k : lk.kernels()) EXPECT_NE(k.name(), "_test_sleep");
  EXPECT_EQ(d.Terminate(), 0);
  std::cerr << d.Log();
}

TEST(Lifecycle, SecondDaemonOnTakenPortFails) {
  Daemon first({}, /*with_unix=*/false);
  ASSERT_TRUE(first.ok()) << first.Log();
  std::string cmd = std::string(KERNELD_BINARY) + " --listen=" + first.target() +
                    " --metrics_listen=off 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("cannot listen on " + first.target()), std::string::npos) << out;
  EXPECT_NE(out.find("Address already in use"), std::string::npos) << out;
  EXPECT_TRUE(first.Serving());
}

TEST(Lifecycle, WorkerSpinServesAndBadValueIsRefused) {
  Daemon d({"--worker_spin_us=200"});
  ASSERT_TRUE(d.ok()) << d.Log();
  for (int i = 0; i < 20; ++i) {
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(ScaleRequest(DType::kFloat32, {127}, 2.0), &resp).ok());
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
  }
  EXPECT_EQ(d.Terminate(), 0);

  std::string cmd = std::string(KERNELD_BINARY) + " --worker_spin_us=-5 --metrics_listen=off 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("worker_spin_us"), std::string::npos) << out;
}

TEST(Lifecycle, FullQueueAnswersResourceExhausted) {
  // No in-flight quota: its default (--queue_capacity) would refuse first.
  Daemon d({"--cpu_workers=1", "--queue_capacity=1", "--quota_inflight=0", "--enable_test_ops"});
  ASSERT_TRUE(d.ok()) << d.Log();
  std::vector<std::future<grpc::Status>> results;
  for (int i = 0; i < 8; ++i)
    results.push_back(std::async(std::launch::async, [&] {
      v1::ExecuteResponse resp;
      return d.client().Execute(SleepRequest(200), &resp);
    }));
  int ok = 0, exhausted = 0;
  for (auto& f : results) {
    grpc::Status st = f.get();
    if (st.ok()) ++ok;
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      EXPECT_NE(st.error_message().find("queue is full"), std::string::npos) << st.error_message();
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(ok + exhausted, 8);
  EXPECT_TRUE(d.Serving());
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Lifecycle, ExpiredDeadlineIsNotExecuted) {
  Daemon d({"--cpu_workers=1", "--log_level=1", "--enable_test_ops"});
  ASSERT_TRUE(d.ok()) << d.Log();
  // Occupy the only worker for 600 ms, then queue a request whose 150 ms
  // deadline passes while it waits.
  auto blocker = std::async(std::launch::async, [&] {
    v1::ExecuteResponse resp;
    return d.client().Execute(SleepRequest(600, "blocker"), &resp);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  v1::ExecuteResponse resp;
  grpc::Status st = d.client().Execute(SleepRequest(0, "late"), &resp, std::chrono::milliseconds(150));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(blocker.get().ok());
  // The server saw it expire in its queue and did not run it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (d.Log().find("id=late") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string log = d.Log();
  EXPECT_NE(log.find("id=late op=_test_sleep backend=cpu device=cpu code=DEADLINE_EXCEEDED"), std::string::npos) << log;
  EXPECT_NE(log.find("not executed"), std::string::npos) << log;
  EXPECT_NE(d.Metrics().find("code=\"DEADLINE_EXCEEDED\""), std::string::npos);
  EXPECT_EQ(d.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
