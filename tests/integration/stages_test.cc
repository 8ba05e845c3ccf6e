// ExecutionInfo's per-stage timestamps (decoded, scheduled, dequeued,
// launched, kernel_done, completed) on a real daemon: in order on success,
// over Execute and ExecuteStream, on the inline path and on the worker
// pool's; zero for the stages a refused request never reached; and written
// to the trace.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// The order every successful response satisfies. completed_ns and total_ns
// come from one clock read (the last before the response goes to gRPC).
void ExpectStagesInOrder(const v1::ExecutionInfo& i) {
  SCOPED_TRACE(i.DebugString());
  EXPECT_GT(i.decoded_ns(), 0);
  EXPECT_LE(i.decoded_ns(), i.scheduled_ns());
  EXPECT_LE(i.scheduled_ns(), i.dequeued_ns());
  EXPECT_LE(i.dequeued_ns(), i.launched_ns());
  EXPECT_LE(i.launched_ns(), i.kernel_done_ns());
  EXPECT_LE(i.kernel_done_ns(), i.completed_ns());
  EXPECT_EQ(i.completed_ns(), i.total_ns());
  EXPECT_GT(i.total_ns(), 0);
  // The older fields agree with the stages.
  EXPECT_EQ(i.queue_ns(), i.dequeued_ns());
  EXPECT_LE(i.execute_ns(), i.kernel_done_ns() - i.launched_ns());
}

void RunScales(Daemon& d, int n) {
  for (int k = 0; k < n; ++k) {
    client::HostTensor x;
    auto req = ScaleRequest(DType::kFloat32, {16}, 2.0, &x);
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(req, &resp).ok());
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
    ExpectStagesInOrder(resp.info());
  }
}

TEST(StagesTest, UnaryScaleInline) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  RunScales(d, 20);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// --inline_max_kb=-1: every request goes through the queue and a pool thread.
TEST(StagesTest, UnaryScaleThroughTheQueue) {
  Daemon d({"--inline_max_kb=-1"});
  ASSERT_TRUE(d.ok()) << d.Log();
  RunScales(d, 20);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(StagesTest, StreamScale) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  auto stream = d.client().OpenStream();
  constexpr int kN = 50;
  for (int k = 0; k < kN; ++k) {
    client::HostTensor x;
    ASSERT_TRUE(stream->Send(ScaleRequest(DType::kFloat16, {1 + k}, 1.5, &x)));
  }
  for (int k = 0; k < kN; ++k) {
    v1::ExecuteResponse resp;
    ASSERT_TRUE(stream->Receive(&resp));
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
    ExpectStagesInOrder(resp.info());
  }
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// A refused unary call carries no response message; a stream answers each
// request with its own status and info.
TEST(StagesTest, RefusedRequestsReportOnlyTheStagesReached) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  auto stream = d.client().OpenStream();
  client::HostTensor x;
  // Refused in decode (factor is required): no stage reached but completion.
  auto bad = ScaleRequest(DType::kFloat32, {16}, 2.0, &x);
  bad.mutable_attrs()->clear();
  ASSERT_TRUE(stream->Send(bad));
  // Decoded, then refused by the scheduler (no such device).
  auto nowhere = ScaleRequest(DType::kFloat32, {16}, 2.0, &x);
  nowhere.set_device("cuda:7");
  ASSERT_TRUE(stream->Send(nowhere));

  v1::ExecuteResponse r1;
  ASSERT_TRUE(stream->Receive(&r1));
  EXPECT_EQ(r1.status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  const v1::ExecutionInfo& i = r1.info();
  EXPECT_EQ(i.decoded_ns(), 0);
  EXPECT_EQ(i.scheduled_ns(), 0);
  EXPECT_EQ(i.dequeued_ns(), 0);
  EXPECT_EQ(i.launched_ns(), 0);
  EXPECT_EQ(i.kernel_done_ns(), 0);
  EXPECT_GT(i.completed_ns(), 0);
  EXPECT_EQ(i.completed_ns(), i.total_ns());

  v1::ExecuteResponse r2;
  ASSERT_TRUE(stream->Receive(&r2));
  EXPECT_NE(r2.status().code(), 0);
  EXPECT_GT(r2.info().decoded_ns(), 0);
  EXPECT_EQ(r2.info().scheduled_ns(), 0);
  EXPECT_EQ(r2.info().dequeued_ns(), 0);
  EXPECT_EQ(r2.info().launched_ns(), 0);
  EXPECT_GE(r2.info().completed_ns(), r2.info().decoded_ns());
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(StagesTest, TraceRecordsTheStages) {
  char dir_tmpl[] = "/tmp/kerneld-stages-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  const std::string trace = dir + "/t.jsonl";
  {
    Daemon d({"--trace_file=" + trace});
    ASSERT_TRUE(d.ok()) << d.Log();
    RunScales(d, 3);
    EXPECT_EQ(d.Terminate(), 0);
  }
  std::ifstream f(trace);
  int lines = 0;
  for (std::string line; std::getline(f, line); ++lines) {
    for (const char* field : {"\"decoded_ns\"", "\"scheduled_ns\"", "\"dequeued_ns\"",
                              "\"launched_ns\"", "\"kernel_done_ns\"", "\"completed_ns\""})
      EXPECT_NE(line.find(field), std::string::npos) << field << " missing in " << line;
  }
  EXPECT_EQ(lines, 3);
  std::system(("rm -rf " + dir).c_str());
}

// utime + stime of a process, in seconds, from /proc/<pid>/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after ')'.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Issue 12's idle goal: an idle daemon uses < 1% of a core, with the
// spin flags on (they poll only while there is traffic), after traffic.
TEST(Idle, DaemonUsesNoCpuWhenIdle) {
  Daemon d({"--adaptive_spin_us=1000"});
  RunScales(d, 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past the spin window
  const double c0 = CpuSeconds(d.pid());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double used = CpuSeconds(d.pid()) - c0;
  EXPECT_LT(used, 0.03) << "idle daemon used " << used << " s of CPU in 3 s";
}

}  // namespace
}  // namespace kerneld::testing
