// kerneld.v1.TuningService.Tune and `kernelctl tune` on the CPU daemon
// (docs/architecture.md, "Scheduling: the rules"): the offline sweep times
// both of _test_two_speed's implementations, writes rows that choose the
// faster, and a daemon restarted with --tuning=frozen on that file runs the
// faster one from its first request, without exploring. Only admins tune.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <iterator>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/kerneld-tune-XXXXXX";
    dir_ = mkdtemp(t);
  }
  ~TempDir() {
    std::string cmd = "rm -rf " + dir_;
    if (std::system(cmd.c_str()) != 0) std::perror("rm");
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

v1::ExecuteRequest TwoSpeed() {
  auto req = ScaleRequest(DType::kFloat32, {64}, 1.0);
  req.set_op("_test_two_speed");
  req.mutable_attrs()->clear();  // fast_ms 0.3, slow_ms 3 (the defaults)
  return req;
}

v1::TuneRequest TuneTwoSpeed() {
  v1::TuneRequest req;
  req.set_op("_test_two_speed");
  req.add_dtypes("float32");
  req.set_repeats(5);
  req.set_device("cpu");  // a GPU host would tune its GPUs, where the op has no impl
  (*req.add_problems()->mutable_shapes())["x"].add_dims(64);
  return req;
}

grpc::Status Tune(client::KernelClient& c, const v1::TuneRequest& req, v1::TuneResponse* resp) {
  auto stub = v1::TuningService::NewStub(c.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub->Tune(&ctx, req, resp);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(Tune, WritesRowsChoosingTheFasterAndAFrozenRestartUsesThemWithoutExploring) {
  TempDir tmp;
  const std::string file = tmp.dir() + "/tuning";
  const std::vector<std::string> flags = {"--enable_test_ops", "--tuning=frozen",
                                          "--tuning_file=" + file};
  {
    Daemon d(flags);
    ASSERT_TRUE(d.ok()) << d.Log();
    // Frozen without a file: the static rank, the slow impl.
    v1::ExecuteResponse before;
    ASSERT_TRUE(d.client().Execute(TwoSpeed(), &before).ok());
    EXPECT_EQ(before.info().backend(), "_test_slow");

    // The unix-socket caller is the test's own uid: an admin.
    v1::TuneResponse resp;
    grpc::Status st = Tune(d.unix_client(), TuneTwoSpeed(), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.results_size(), 1);
    const v1::TuneResult& r = resp.results(0);
    EXPECT_EQ(r.error(), "");
    EXPECT_EQ(r.device(), "cpu");
    EXPECT_EQ(r.problem(), "float32 x=[64]");
    EXPECT_EQ(r.bucket().bucket(), "numel<=64");
    EXPECT_EQ(r.bucket().dtypes(), "float32");
    EXPECT_EQ(r.bucket().chosen(), "cpu");
    ASSERT_EQ(r.bucket().times_size(), 2);
    int64_t fast = 0, slow = 0;
    for (const auto& t : r.bucket().times()) {
      (t.backend() == "cpu" ? fast : slow) = t.median_ns();
      EXPECT_EQ(t.runs(), 5);
    }
    EXPECT_GE(fast, 300'000);  // sleeps 0.3 ms
    EXPECT_GE(slow, 3'000'000);
    EXPECT_GT(slow, 3 * fast);
    EXPECT_EQ(resp.rows_merged(), 2);
    EXPECT_EQ(resp.tuning_file(), file);
    EXPECT_EQ(resp.tuning_mode(), "frozen");

    // The live table changed: this daemon now runs the fast one, tuned.
    for (int i = 0; i < 3; ++i) {
      v1::ExecuteResponse after;
      ASSERT_TRUE(d.client().Execute(TwoSpeed(), &after).ok());
      EXPECT_EQ(after.info().backend(), "cpu") << i;
    }
    // The file holds both rows, in the daemon's format.
    const std::string text = ReadFile(file);
    EXPECT_EQ(text.rfind("kerneld-tuning 1\nstamp\t", 0), 0u) << text;
    EXPECT_NE(text.find("row\t_test_two_speed\tcpu\tfloat32\tnumel<=64\t"), std::string::npos)
        << text;
    EXPECT_NE(text.find("row\t_test_two_speed\t_test_slow\tfloat32\tnumel<=64\t"),
              std::string::npos)
        << text;
    EXPECT_EQ(d.Terminate(), 0);
  }
  {
    Daemon d(flags);
    ASSERT_TRUE(d.ok()) << d.Log();
    for (int i = 0; i < 10; ++i) {
      v1::ExecuteResponse resp;
      ASSERT_TRUE(d.client().Execute(TwoSpeed(), &resp).ok());
      EXPECT_EQ(resp.info().backend(), "cpu") << i;
    }
    const std::string m = d.Metrics();
    EXPECT_EQ(SeriesValue(m, "kerneld_tuning_decisions_total", {"kind=\"explore\""}), 0);
    EXPECT_EQ(SeriesValue(m, "kerneld_tuning_decisions_total", {"kind=\"tuned\""}), 10);
    EXPECT_NE(d.Log().find("2 rows loaded"), std::string::npos) << d.Log();
  }
}

TEST(Tune, KernelctlTunePrintsTheChoiceAndWritesTheFile) {
  TempDir tmp;
  const std::string file = tmp.dir() + "/tuning";
  Daemon d({"--enable_test_ops", "--tuning=online", "--tuning_file=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string ctl = std::string(KERNELCTL_BINARY) + " --target " + d.unix_target() + " ";
  std::string out;
  ASSERT_EQ(
      RunCapture(
          ctl + "tune _test_two_speed --device cpu --shapes 'x=64;x=1000,fast_ms=0.2' --repeats 3",
          &out),
      0)
      << out;
  EXPECT_NE(out.find("float32 x=[64] on cpu [float32 numel<=64]:"), std::string::npos) << out;
  EXPECT_NE(out.find("float32 x=[1000] fast_ms=0.2 on cpu [float32 numel<=1024]:"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("-> cpu"), std::string::npos) << out;
  EXPECT_NE(out.find("4 rows merged into the tuning table (--tuning=online); written to " + file),
            std::string::npos)
      << out;
  // kernelctl list shows the tuned buckets.
  ASSERT_EQ(RunCapture(ctl + "list _test_two_speed", &out), 0) << out;
  EXPECT_NE(out.find("tuned float32 numel<=64 on "), std::string::npos) << out;
  // Mistakes are the CLI's, before any RPC; refusals are the daemon's.
  EXPECT_EQ(RunCapture(ctl + "tune _test_two_speed --shapes y=64", &out), 2);
  EXPECT_NE(out.find("_test_two_speed has no input or attr 'y'"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + "tune _test_two_speed", &out), 2);
  EXPECT_NE(out.find("tune needs --shapes or --shapes-file"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + "tune _test_two_speed --shapes x=64 --dtype float99", &out), 1);
  EXPECT_NE(out.find("INVALID_ARGUMENT: Tune: unknown dtype 'float99'"), std::string::npos) << out;
}

TEST(Tune, RefusesNonAdminsAndBadRequests) {
  Daemon d({"--enable_test_ops"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::TuneResponse resp;
  // An anonymous TCP caller is a user, not an admin.
  grpc::Status st = Tune(d.client(), TuneTwoSpeed(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("Tune (it occupies the device) needs the admin role"),
            std::string::npos)
      << st.error_message();
  auto expect = [&](v1::TuneRequest req, grpc::StatusCode code, const std::string& text) {
    v1::TuneResponse r;
    grpc::Status s = Tune(d.unix_client(), req, &r);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(text), std::string::npos) << s.error_message();
  };
  v1::TuneRequest req = TuneTwoSpeed();
  req.set_op("no_such_op");
  expect(req, grpc::StatusCode::NOT_FOUND, "Tune: no op 'no_such_op'");
  req = TuneTwoSpeed();
  req.mutable_problems(0)->mutable_shapes()->clear();
  expect(req, grpc::StatusCode::INVALID_ARGUMENT, "Tune: problem 1: input 'x' needs a shape");
  req = TuneTwoSpeed();
  (*req.mutable_problems(0)->mutable_shapes())["x"].set_dims(0, -4);
  expect(req, grpc::StatusCode::INVALID_ARGUMENT, "Tune: problem 1: input 'x'");
  req = TuneTwoSpeed();
  req.clear_problems();
  expect(req, grpc::StatusCode::INVALID_ARGUMENT, "Tune: no problems");
  req = TuneTwoSpeed();
  req.set_repeats(100000);
  expect(req, grpc::StatusCode::INVALID_ARGUMENT, "Tune: repeats is 1-1000");
  req = TuneTwoSpeed();
  req.set_device("cuda:7");
  expect(req, grpc::StatusCode::NOT_FOUND, "device 'cuda:7' not found");
  // The test ops stay hidden without --enable_test_ops.
  Daemon plain;
  ASSERT_TRUE(plain.ok()) << plain.Log();
  st = Tune(plain.unix_client(), TuneTwoSpeed(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
}

}  // namespace
}  // namespace kerneld::testing
