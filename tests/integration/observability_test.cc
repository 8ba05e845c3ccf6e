// Request logging levels and formats, and workload capture + replay, through
// the real daemon and the real kernelctl.
#include <fstream>
#include <map>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

std::string ReadFile(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int Count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = 0; (p = hay.find(needle, p)) != std::string::npos; p += needle.size()) ++n;
  return n;
}

void SendMix(client::KernelClient& c, int n, std::map<std::string, int>* per_op) {
  for (int i = 0; i < n; ++i) {
    auto req = ScaleRequest(i % 2 ? DType::kFloat16 : DType::kFloat32, {1 + i % 7, 33}, 1.5,
                            nullptr, static_cast<uint64_t>(i));
    req.set_request_id("m" + std::to_string(i));
    if (i % 10 == 3) req.set_op("not_an_op");
    if (i % 10 == 7) req.mutable_attrs()->clear();
    v1::ExecuteResponse resp;
    (void)c.Execute(req, &resp);
    ++(*per_op)[req.op()];
  }
}

TEST(Logging, LevelZeroWritesNothingPerRequest) {
  Daemon d({"--log_level=0"});
  ASSERT_TRUE(d.ok());
  std::map<std::string, int> ops;
  SendMix(d.client(), 20, &ops);
  EXPECT_EQ(Count(d.Log(), "kerneld: request"), 0) << d.Log();
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Logging, LevelOneAndThreeText) {
  Daemon d({"--log_level=3"});
  ASSERT_TRUE(d.ok());
  auto req = ScaleRequest(DType::kBFloat16, {2, 5}, 2.0);
  req.set_request_id("abc");
  v1::ExecuteResponse resp;
  ASSERT_TRUE(d.client().Execute(req, &resp).ok());
  std::string log = d.Log();
  size_t start = log.find(
      "kerneld: start id=abc op=scale backend=cpu device=cpu in:x=bfloat16[2, 5] factor=2");
  size_t done =
      log.find("kerneld: request id=abc op=scale backend=cpu device=cpu code=OK total_us=");
  ASSERT_NE(start, std::string::npos) << log;
  ASSERT_NE(done, std::string::npos) << log;
  EXPECT_LT(start, done);  // written before execution
  EXPECT_NE(log.find("out:y=bfloat16[2, 5]", done), std::string::npos) << log;
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Logging, LevelFiveJsonToFileWithOutputStats) {
  char tmpl[] = "/tmp/kerneld-log-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  {
    Daemon d({"--log_level=5", "--log_format=json", std::string("--log_file=") + tmpl});
    ASSERT_TRUE(d.ok());
    v1::ExecuteRequest req;
    req.set_op("scale");
    auto& x = (*req.mutable_inputs())["x"];
    client::HostTensor h;
    h.dtype = DType::kFloat32;
    h.shape = {4};
    h.values = {1.0, -3.0, NAN, INFINITY};
    client::ToProto(h, &x);
    (*req.mutable_attrs())["factor"].set_f(2.0);
    req.set_request_id("j1");
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(req, &resp).ok());
    EXPECT_EQ(d.Terminate(), 0);
  }
  std::string log = ReadFile(tmpl);
  std::remove(tmpl);
  // Every line opens with its time and level (docs/metrics.md).
  EXPECT_EQ(log.rfind("{\"ts\":\"", 0), 0u) << log;
  EXPECT_NE(log.find("\"level\":\"debug\",\"event\":\"start\",\"id\":\"j1\",\"op\":\"scale\""),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("\"level\":\"info\",\"event\":\"request\",\"id\":\"j1\""), std::string::npos)
      << log;
  EXPECT_NE(log.find("\"inputs\":[{\"name\":\"x\",\"dtype\":\"float32\",\"shape\":[4]}]"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("\"event\":\"request\",\"id\":\"j1\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"output_stats\":{\"y\":{\"min\":-6,\"max\":2,\"nan\":1,\"inf\":1}}"),
            std::string::npos)
      << log;
}

TEST(Trace, CaptureAndReplayCountsMatch) {
  char dir_tmpl[] = "/tmp/kerneld-trace-XXXXXX";
  std::string dir = mkdtemp(dir_tmpl);
  std::string trace = dir + "/trace.jsonl";
  std::map<std::string, int> sent;
  {
    Daemon d({"--trace_file=" + trace});
    ASSERT_TRUE(d.ok()) << d.Log();
    SendMix(d.client(), 1000, &sent);
    EXPECT_EQ(d.Terminate(), 0);
  }
  std::string t = ReadFile(trace);
  EXPECT_EQ(Count(t, "\n"), 1000);
  EXPECT_NE(t.find("\"op\":\"scale\""), std::string::npos);
  EXPECT_NE(t.find("\"code\":\"NOT_FOUND\""), std::string::npos);
  EXPECT_NE(t.find("\"dtype\":\"float16\""), std::string::npos);

  Daemon replay_target;
  ASSERT_TRUE(replay_target.ok());
  std::string cmd = std::string(KERNELCTL_BINARY) + " --target " + replay_target.target() +
                    " replay " + trace + " --concurrency 4 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  // Per op: the replayed count equals what was captured.
  for (const auto& [op, n] : sent) {
    std::istringstream in(out);
    bool found = false;
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      std::string name;
      long long count = -1;
      ls >> name >> count;
      if (name == op) {
        found = true;
        EXPECT_EQ(count, n) << op << "\n" << out;
      }
    }
    EXPECT_TRUE(found) << op << "\n" << out;
  }
  EXPECT_NE(out.find("replayed 1000 requests"), std::string::npos) << out;
  // The replayed requests fail and succeed as the originals did.
  EXPECT_NE(out.find("OK=800"), std::string::npos) << out;
  EXPECT_NE(out.find("NOT_FOUND=100"), std::string::npos) << out;
  EXPECT_NE(out.find("INVALID_ARGUMENT=100"), std::string::npos) << out;
  EXPECT_EQ(replay_target.Terminate(), 0);
  std::system(("rm -rf " + dir).c_str());
}

TEST(Trace, SampleRate) {
  char dir_tmpl[] = "/tmp/kerneld-trace-XXXXXX";
  std::string dir = mkdtemp(dir_tmpl);
  std::string trace = dir + "/t.jsonl";
  {
    Daemon d({"--trace_file=" + trace, "--trace_sample_rate=0.1"});
    ASSERT_TRUE(d.ok());
    std::map<std::string, int> sent;
    SendMix(d.client(), 200, &sent);
    EXPECT_EQ(d.Terminate(), 0);
  }
  EXPECT_EQ(Count(ReadFile(trace), "\n"), 20);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace kerneld::testing
