// kernelctl graph FILE.json against a real daemon on the CPU: the shipped
// example graphs run, repeat with a latency summary, and equal the same
// ops called one by one (--check); a bad file and a refused graph get a
// clear message and their exit codes (docs/graphs.md, "kernelctl graph").
#include <fstream>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

class GraphKernelctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon(std::vector<std::string>{}); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static int Kernelctl(const std::string& args, std::string* out) {
    return RunCapture(std::string(KERNELCTL_BINARY) + " --target " + daemon_->target() + " " + args,
                      out);
  }
  static std::string Write(const std::string& name, const std::string& text) {
    const std::string path = daemon_->dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static Daemon* daemon_;
};
Daemon* GraphKernelctlTest::daemon_ = nullptr;

TEST_F(GraphKernelctlTest, MlpExampleRepeatsAndEqualsTheOpsOneByOne) {
  ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
  std::string out;
  ASSERT_EQ(
      Kernelctl("graph " EXAMPLES_DIR "/graphs/mlp_small.json --repeat 5 --check --seed 7", &out),
      0)
      << out;
  EXPECT_NE(out.find("y: bfloat16 [4, 256] ="), std::string::npos) << out;
  EXPECT_NE(out.find("residual: bfloat16 [4, 256] ="), std::string::npos) << out;
  EXPECT_NE(out.find("graph of 4 steps on cpu/cpu: 5 calls, client p50 "), std::string::npos)
      << out;
  EXPECT_NE(out.find(" p99 "), std::string::npos) << out;
  EXPECT_NE(out.find("check: 2 outputs equal, bit for bit, the ops called one by one on cpu"),
            std::string::npos)
      << out;
  // The same seed draws the same inputs: the same answer twice.
  std::string again;
  ASSERT_EQ(Kernelctl("graph " EXAMPLES_DIR "/graphs/mlp_small.json --seed 7", &again), 0);
  auto first_line = [](const std::string& s, const std::string& prefix) {
    const size_t at = s.find(prefix);
    return at == std::string::npos ? std::string() : s.substr(at, s.find('\n', at) - at);
  };
  EXPECT_EQ(first_line(out, "y: "), first_line(again, "y: "));
  EXPECT_FALSE(first_line(out, "y: ").empty());
}

TEST_F(GraphKernelctlTest, ChainFromSeveralClientsReportsThroughput) {
  ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
  std::string out;
  ASSERT_EQ(
      Kernelctl("graph " EXAMPLES_DIR "/graphs/chain16.json --repeat 4 --concurrency 3 --check",
                &out),
      0)
      << out;
  EXPECT_NE(out.find("graph of 16 steps on cpu/cpu: 12 calls"), std::string::npos) << out;
  EXPECT_NE(out.find("3 clients: "), std::string::npos) << out;
  EXPECT_NE(out.find("steps/s"), std::string::npos) << out;
  EXPECT_NE(out.find("check: 1 outputs equal, bit for bit"), std::string::npos) << out;
}

TEST_F(GraphKernelctlTest, BadFilesAndRefusedGraphsSayWhy) {
  ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
  std::string out;
  EXPECT_EQ(Kernelctl("graph " + Write("broken.json", "{\"steps\": [{\"op\": \"scale\"}"), &out),
            2);
  EXPECT_NE(out.find("is not an ExecuteGraphRequest in JSON"), std::string::npos) << out;
  EXPECT_EQ(Kernelctl("graph " + Write("nodtype.json", R"({"inputs": {"x": {"shape": [4]}},
      "steps": [{"op": "scale", "inputs": {"x": "x"}}]})"),
                      &out),
            2);
  EXPECT_NE(out.find("graph input 'x' has no data and no dtype"), std::string::npos) << out;
  EXPECT_EQ(Kernelctl("graph " + Write("unknown.json", R"({"inputs": {"x": {"dtype":
      "DTYPE_FLOAT32", "shape": [4]}}, "steps": [{"op": "scale", "inputs": {"x": "x"}, "attrs": {"factor": {"f": 2}}},
      {"op": "no_such_op", "inputs": {"x": "step0"}}]})"),
                      &out),
            1);
  EXPECT_NE(out.find("NOT_FOUND: graph step 1 (no_such_op): unknown op"), std::string::npos) << out;
  EXPECT_EQ(Kernelctl("graph /nonexistent/graph.json", &out), 2);
  EXPECT_NE(out.find("cannot read /nonexistent/graph.json"), std::string::npos) << out;
}

}  // namespace
}  // namespace kerneld::testing
