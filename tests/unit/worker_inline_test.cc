// DeviceWorker's inline path: a small task submitted while the device is idle
// runs on the submitting thread; otherwise it queues. The concurrency bound,
// the queue bound, deadlines and cancellation hold on both paths, and the
// stage stamps are in order.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "devices/cpu_worker.h"

namespace kerneld::server {
namespace {

struct Probe {
  OpDef op{"probe"};
  std::atomic<int> runs{0};
  std::atomic<int> sleep_ms{0};
  std::thread::id last_thread;
  Probe() {
    op.Impl("cpu", [this](KernelContext&) {
      ++runs;
      last_thread = std::this_thread::get_id();
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms.load()));
      return Status::Ok();
    });
  }
  std::unique_ptr<Task> MakeTask(std::promise<Status>* result, TaskTiming* timing = nullptr,
                                 int64_t bytes = 16) {
    auto t = std::make_unique<Task>();
    t->call.op = &op;
    t->impl = &op.impls[0];
    t->arrival = std::chrono::steady_clock::now();
    t->bytes = bytes;
    t->done = [result, timing](Status st, const TaskTiming& tt) {
      if (timing != nullptr) *timing = tt;
      result->set_value(st);
    };
    return t;
  }
};

TEST(WorkerInline, SmallTaskOnIdleDeviceRunsOnTheCaller) {
  Probe p;
  CpuWorker w(1, 1, 4);
  w.set_inline_max_bytes(1024);
  std::promise<Status> r;
  TaskTiming timing;
  auto t = p.MakeTask(&r, &timing);
  ASSERT_TRUE(w.Submit(t));
  auto f = r.get_future();
  // Done before Submit returned, on this thread.
  ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(p.last_thread, std::this_thread::get_id());
  EXPECT_TRUE(timing.executed);
  EXPECT_GT(timing.scheduled_ns, 0);
  EXPECT_LE(timing.scheduled_ns, timing.dequeued_ns);
  EXPECT_LE(timing.dequeued_ns, timing.launched_ns);
  EXPECT_LE(timing.launched_ns, timing.kernel_done_ns);
}

TEST(WorkerInline, LargeTaskQueues) {
  Probe p;
  CpuWorker w(1, 1, 4);
  w.set_inline_max_bytes(1024);
  std::promise<Status> r;
  auto t = p.MakeTask(&r, nullptr, 4096);
  ASSERT_TRUE(w.Submit(t));
  EXPECT_TRUE(r.get_future().get().ok());
  EXPECT_NE(p.last_thread, std::this_thread::get_id());
}

TEST(WorkerInline, ExpiredOrCancelledIsNotExecutedInline) {
  Probe p;
  CpuWorker w(1, 1, 4);
  w.set_inline_max_bytes(1024);
  std::promise<Status> r1, r2;
  auto late = p.MakeTask(&r1);
  late->deadline = std::chrono::system_clock::now() - std::chrono::milliseconds(1);
  ASSERT_TRUE(w.Submit(late));
  EXPECT_EQ(r1.get_future().get().code(), StatusCode::kDeadlineExceeded);
  auto gone = p.MakeTask(&r2);
  gone->cancelled = [] { return true; };
  ASSERT_TRUE(w.Submit(gone));
  EXPECT_EQ(r2.get_future().get().code(), StatusCode::kCancelled);
  EXPECT_EQ(p.runs, 0);
}

// One slot: while an inline task holds it, the next task queues (it does
// not run beside it), and a queue of one then refuses the third.
TEST(WorkerInline, SlotBoundAndQueueBoundHold) {
  Probe p;
  p.sleep_ms = 200;
  CpuWorker w(1, 1, 1);
  w.set_inline_max_bytes(1024);
  std::promise<Status> r1, r2, r3;
  std::thread holder([&] {
    auto t = p.MakeTask(&r1);
    ASSERT_TRUE(w.Submit(t));  // runs inline on this thread for 200 ms
  });
  while (p.runs.load() == 0) std::this_thread::yield();
  auto t2 = p.MakeTask(&r2);
  ASSERT_TRUE(w.Submit(t2));  // queued: the slot is taken
  EXPECT_EQ(w.queue_depth(), 1);
  EXPECT_EQ(p.runs.load(), 1);
  auto t3 = p.MakeTask(&r3);
  EXPECT_FALSE(w.Submit(t3));  // queue full
  ASSERT_NE(t3, nullptr);      // refused tasks are left to the caller
  holder.join();
  EXPECT_TRUE(r1.get_future().get().ok());
  EXPECT_TRUE(r2.get_future().get().ok());
  EXPECT_EQ(p.runs.load(), 2);
}

// An op that recently ran long goes to the pool even when small and idle:
// inline, it would hold the receiving thread (a stream's reads) meanwhile.
TEST(WorkerInline, SlowOpLeavesTheCallerThread) {
  Probe p;
  CpuWorker w(1, 1, 4);
  w.set_inline_max_bytes(1024);
  w.set_inline_max_ns(2'000'000);  // 2 ms
  p.sleep_ms = 20;
  std::promise<Status> r1, r2, r3;
  auto t1 = p.MakeTask(&r1);
  ASSERT_TRUE(w.Submit(t1));  // no estimate yet: inline
  EXPECT_TRUE(r1.get_future().get().ok());
  EXPECT_EQ(p.last_thread, std::this_thread::get_id());
  EXPECT_GE(w.ExecuteEstimateNs(&p.op), 20'000'000);
  auto t2 = p.MakeTask(&r2);
  ASSERT_TRUE(w.Submit(t2));
  auto f2 = r2.get_future();
  EXPECT_EQ(f2.wait_for(std::chrono::seconds(0)), std::future_status::timeout);  // queued, running
  EXPECT_TRUE(f2.get().ok());
  EXPECT_NE(p.last_thread, std::this_thread::get_id());
  // Fast again: the average comes down over a few runs, then inline again.
  p.sleep_ms = 0;
  for (int i = 0; i < 64 && w.ExecuteEstimateNs(&p.op) > 2'000'000; ++i) {
    std::promise<Status> r;
    auto t = p.MakeTask(&r);
    ASSERT_TRUE(w.Submit(t));
    EXPECT_TRUE(r.get_future().get().ok());
  }
  // done runs before the pool thread gives its slot back and records the
  // time: let it finish that before the inline attempt.
  for (int i = 0; i < 200 && (w.inflight() > 0 || w.ExecuteEstimateNs(&p.op) > 2'000'000); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto t3 = p.MakeTask(&r3);
  ASSERT_TRUE(w.Submit(t3));
  EXPECT_TRUE(r3.get_future().get().ok());
  EXPECT_EQ(p.last_thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace kerneld::server
