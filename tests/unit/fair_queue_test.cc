// The device queue's order (server/scheduler/fair_queue.h): priority first,
// aging so low priority never starves, round robin between principals.
#include "scheduler/fair_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kerneld::server {
namespace {

constexpr int64_t kMs = 1'000'000;

std::vector<std::string> Drain(FairQueue<std::string>& q, int64_t now) {
  std::vector<std::string> out;
  while (!q.empty()) out.push_back(q.Pop(now));
  return out;
}

TEST(FairQueue, HigherPriorityFirstFifoWithinAPrincipal) {
  FairQueue<std::string> q(100 * kMs);
  q.Push("low1", 0, "p", 0);
  q.Push("high1", 5, "p", 1);
  q.Push("low2", 0, "p", 2);
  q.Push("mid", 1, "p", 3);
  q.Push("high2", 5, "p", 4);
  q.Push("neg", -3, "p", 5);
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(Drain(q, 10),
            (std::vector<std::string>{"high1", "high2", "mid", "low1", "low2", "neg"}));
}

TEST(FairQueue, AgingLetsALongWaitingLowPriorityTaskOvertake) {
  FairQueue<std::string> q(10 * kMs);  // one level per 10 ms waited
  q.Push("old_low", 0, "a", 0);
  // 25 ms later: old_low's effective priority is 0 + 2 = 2.
  q.Push("new_p1", 1, "b", 25 * kMs);
  q.Push("new_p3", 3, "b", 25 * kMs);
  EXPECT_EQ(q.Pop(25 * kMs), "new_p3");   // 3 > 2
  EXPECT_EQ(q.Pop(25 * kMs), "old_low");  // 2 > 1 (+0 aging)
  EXPECT_EQ(q.Pop(25 * kMs), "new_p1");
  // Equal effective priority: the higher base priority.
  q.Push("aged", 0, "a", 0);
  q.Push("fresh", 1, "b", 10 * kMs);
  EXPECT_EQ(q.Pop(10 * kMs), "fresh");
  // Under a steady stream of priority-5 work, a priority-0 task still runs
  // once it has waited 6 levels' worth.
  FairQueue<std::string> s(kMs);
  s.Push("starving", 0, "a", 0);
  int64_t now = 0;
  int served_before = 0;
  for (;; now += kMs / 2) {
    s.Push("busy", 5, "b", now);
    if (s.Pop(now) == "starving") break;
    ++served_before;
  }
  EXPECT_LE(now, 6 * kMs);
  EXPECT_GE(served_before, 10);
}

TEST(FairQueue, PrincipalsTakeTurnsWithinAPriority) {
  FairQueue<std::string> q;
  for (int i = 0; i < 100; ++i) q.Push("flood" + std::to_string(i), 0, "flooder", i);
  q.Push("t1", 0, "trickle", 100);
  q.Push("t2", 0, "trickle", 101);
  q.Push("o1", 0, "other", 102);
  EXPECT_EQ(q.CountOf("flooder"), 100u);
  // The flooder's first, then every principal in turn: the trickle waits for
  // one flood task, not a hundred.
  EXPECT_EQ(q.Pop(200), "flood0");
  EXPECT_EQ(q.Pop(200), "t1");
  EXPECT_EQ(q.Pop(200), "o1");
  EXPECT_EQ(q.Pop(200), "flood1");
  EXPECT_EQ(q.Pop(200), "t2");
  EXPECT_EQ(q.Pop(200), "flood2");  // trickle and other are empty: flooder alone
  EXPECT_EQ(q.Pop(200), "flood3");
  EXPECT_EQ(q.CountOf("trickle"), 0u);
  // A principal that comes back joins the end of the turn.
  q.Push("t3", 0, "trickle", 300);
  EXPECT_EQ(q.Pop(300), "flood4");
  EXPECT_EQ(q.Pop(300), "t3");
  EXPECT_EQ(q.size(), 95u);
}

TEST(FairQueue, RoundRobinHoldsInsideEachPriorityLevel) {
  FairQueue<std::string> q(1000 * kMs);
  q.Push("a_hi1", 2, "a", 0);
  q.Push("a_hi2", 2, "a", 0);
  q.Push("b_hi1", 2, "b", 0);
  q.Push("b_lo1", 0, "b", 0);
  q.Push("a_lo1", 0, "a", 0);
  EXPECT_EQ(Drain(q, 1), (std::vector<std::string>{"a_hi1", "b_hi1", "a_hi2", "b_lo1", "a_lo1"}));
}

}  // namespace
}  // namespace kerneld::server
