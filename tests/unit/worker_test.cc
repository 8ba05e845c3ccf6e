// Device workers: a task past its deadline or cancelled is never executed; a
// full queue refuses; Stop drains what was queued.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "devices/cpu_worker.h"
#include "service/sync_service.h"

namespace kerneld::server {
namespace {

struct Probe {
  OpDef op{"probe"};
  std::atomic<int> runs{0};
  Probe() {
    op.Impl("cpu", [this](KernelContext&) {
      ++runs;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return Status::Ok();
    });
  }
  std::unique_ptr<Task> MakeTask(std::promise<Status>* result) {
    auto t = std::make_unique<Task>();
    t->call.op = &op;
    t->impl = &op.impls[0];
    t->arrival = std::chrono::steady_clock::now();
    t->done = [result](Status st, const TaskTiming&) { result->set_value(st); };
    return t;
  }
};

TEST(Worker, RunsTasks) {
  Probe p;
  CpuWorker w(1, 1, 4);
  std::promise<Status> r;
  auto t = p.MakeTask(&r);
  ASSERT_TRUE(w.Submit(t));
  EXPECT_TRUE(r.get_future().get().ok());
  EXPECT_EQ(p.runs, 1);
}

TEST(Worker, ExpiredDeadlineIsNotExecuted) {
  Probe p;
  CpuWorker w(1, 1, 4);
  std::promise<Status> r;
  auto t = p.MakeTask(&r);
  t->deadline = std::chrono::system_clock::now() - std::chrono::milliseconds(1);
  ASSERT_TRUE(w.Submit(t));
  Status st = r.get_future().get();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("not executed"), std::string::npos);
  EXPECT_EQ(p.runs, 0);
}

TEST(Worker, CancelledIsNotExecuted) {
  Probe p;
  CpuWorker w(1, 1, 4);
  std::promise<Status> r;
  auto t = p.MakeTask(&r);
  t->cancelled = [] { return true; };
  ASSERT_TRUE(w.Submit(t));
  EXPECT_EQ(r.get_future().get().code(), StatusCode::kCancelled);
  EXPECT_EQ(p.runs, 0);
}

// The sync API's cancellation check polls gRPC's completion queue, 30 us a
// request on two cores when it ran on every dequeue: it is asked only of a
// request that waited, and then answers what the call says.
TEST(Worker, SyncCancelCheckOnlyAfterAWait) {
  std::atomic<int> asked{0};
  auto check = CancelCheckAfter(std::chrono::milliseconds(50), [&] {
    ++asked;
    return true;
  });
  EXPECT_FALSE(check());
  EXPECT_EQ(asked, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(check());
  EXPECT_EQ(asked, 1);

  // A queued request behind a running one is still refused once cancelled.
  Probe p;
  CpuWorker w(1, 1, 4);
  std::promise<Status> first, second;
  auto t1 = p.MakeTask(&first);
  ASSERT_TRUE(w.Submit(t1));  // runs 20 ms
  auto t2 = p.MakeTask(&second);
  t2->cancelled = CancelCheckAfter(std::chrono::milliseconds(5), [] { return true; });
  ASSERT_TRUE(w.Submit(t2));
  EXPECT_TRUE(first.get_future().get().ok());
  EXPECT_EQ(second.get_future().get().code(), StatusCode::kCancelled);
  EXPECT_EQ(p.runs, 1);
}

TEST(Worker, FullQueueRefusesAndStopDrains) {
  Probe p;
  CpuWorker w(1, 1, 2);
  std::vector<std::promise<Status>> rs(6);
  int accepted = 0, refused = 0;
  for (auto& r : rs) {
    auto t = p.MakeTask(&r);
    if (w.Submit(t)) {
      ++accepted;
    } else {
      ++refused;
      EXPECT_NE(t, nullptr);  // a refused task is handed back untouched
    }
  }
  EXPECT_GE(refused, 3);  // one running + two queued at most
  w.Stop();               // finishes what was accepted
  EXPECT_EQ(p.runs, accepted);
  std::promise<Status> late;
  auto t = p.MakeTask(&late);
  EXPECT_FALSE(w.Submit(t));  // stopped: refuses
}

// Idle threads that poll the queue (set_spin) still run each task once,
// pick up work submitted while they spin or sleep, and let Stop finish.
TEST(Worker, SpinningThreadsRunEveryTaskAndStop) {
  Probe p;
  CpuWorker w(2, 1, 8);
  w.set_spin(std::chrono::milliseconds(5));
  for (int i = 0; i < 4; ++i) {
    std::promise<Status> r;
    auto t = p.MakeTask(&r);
    ASSERT_TRUE(w.Submit(t));
    EXPECT_TRUE(r.get_future().get().ok());
    // Alternate between arriving inside the spin window and after it.
    if (i % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(p.runs, 4);
  const auto t0 = std::chrono::steady_clock::now();
  w.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// CPU time of the whole process (the worker's threads included).
double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// The adaptive spin polls right after traffic and costs nothing once the
// daemon is quiet: the idle-cost goal (< 1% of a core) holds with it on.
TEST(Worker, AdaptiveSpinPollsAfterTrafficAndSleepsWhenIdle) {
  Probe p;
  CpuWorker w(2, 1, 8);
  w.set_adaptive_spin(std::chrono::milliseconds(20));  // busy window: 160 ms
  std::promise<Status> r;
  auto t = p.MakeTask(&r);
  ASSERT_TRUE(w.Submit(t));
  EXPECT_TRUE(r.get_future().get().ok());
  // Just after a task: the idle thread polls (about a core for the window).
  double c0 = ProcessCpuMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double busy = ProcessCpuMs() - c0;
  // Well past the window: asleep on the condition variable.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c0 = ProcessCpuMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double idle = ProcessCpuMs() - c0;
  // A poller on a loaded machine gets only part of a core; a sleeper gets
  // none: a small bound separates them.
  EXPECT_GT(busy, 1.0) << "no polling after traffic";
  EXPECT_LT(idle, 3.0) << "idle worker used " << idle << " ms of CPU in 300 ms";
  // Tasks still run, and Stop is prompt.
  std::promise<Status> r2;
  auto t2 = p.MakeTask(&r2);
  ASSERT_TRUE(w.Submit(t2));
  EXPECT_TRUE(r2.get_future().get().ok());
  EXPECT_EQ(p.runs, 2);
}

TEST(Worker, EachThreadRunsWarmUpsOfItsDeviceBeforeTasks) {
  // ImplDef::thread_warm_up: once per worker thread, before that thread's
  // first task, for the impls that accept the worker's device only. The op
  // stays registered for the process; its hooks count only while `active`.
  static std::atomic<bool> active{false};
  static std::mutex mu;
  static std::set<std::thread::id> warmed;
  static std::atomic<int> cuda_warm_ups{0}, ran_warm{0}, ran_cold{0};
  if (OpRegistry::Global().Find("warm_up_probe") == nullptr) {
    OpDef op("warm_up_probe");
    op.Impl("cpu", [](KernelContext&) {
      std::lock_guard<std::mutex> lock(mu);
      (warmed.count(std::this_thread::get_id()) ? ran_warm : ran_cold)++;
      return Status::Ok();
    });
    op.impls.back().thread_warm_up = [](const DeviceInfo& dev) {
      if (!active) return;
      EXPECT_TRUE(dev.device.is_cpu());
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(warmed.insert(std::this_thread::get_id()).second) << "warmed twice";
    };
    op.Impl(
        "cuda", [](KernelContext&) { return Status::Ok(); }, Requirements::Cuda(80));
    op.impls.back().thread_warm_up = [](const DeviceInfo&) {
      if (active) ++cuda_warm_ups;
    };
    ASSERT_TRUE(OpRegistry::Global().Register(std::move(op)).ok());
  }
  const OpDef* def = OpRegistry::Global().Find("warm_up_probe");
  ASSERT_NE(def, nullptr);
  warmed.clear();
  cuda_warm_ups = ran_warm = ran_cold = 0;
  active = true;
  {
    CpuWorker w(3, 1, 64);  // 3 worker threads
    std::vector<std::promise<Status>> results(32);
    for (auto& r : results) {
      auto t = std::make_unique<Task>();
      t->call.op = def;
      t->impl = &def->impls[0];
      t->arrival = std::chrono::steady_clock::now();
      t->done = [&r](Status st, const TaskTiming&) { r.set_value(st); };
      ASSERT_TRUE(w.Submit(t));
    }
    for (auto& r : results) EXPECT_TRUE(r.get_future().get().ok());
    w.Stop();
  }
  active = false;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(warmed.size(), 3u);  // every thread, once
  EXPECT_EQ(ran_warm.load(), 32);
  EXPECT_EQ(ran_cold.load(), 0);
  EXPECT_EQ(cuda_warm_ups.load(), 0);  // the cuda impl does not accept a cpu worker
}

}  // namespace
}  // namespace kerneld::server
