// kernelctl perf against the real daemon: what it says it sent is what the
// server counted, its percentiles are ordered, --compare-floor runs against
// the real floor server (bench/echo_floor_server.cc), and run --stream
// reports each request's own round trip (ping-pong), not a queue.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// Runs kernelctl with `args`; returns its exit status and fills *out.
int Ctl(const std::string& args, std::string* out) {
  return RunCapture(std::string(KERNELCTL_BINARY) + " " + args, out);
}

// Sum over every series of `name` whose line contains `label`.
double SumSeries(const std::string& exposition, const std::string& name, const std::string& label) {
  std::istringstream in(exposition);
  double sum = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos)
      sum += std::stod(line.substr(line.rfind(' ') + 1));
  return sum;
}

// kernelctl perf --json writes one record per line inside an array; the
// numeric fields are read by name ("p50" is the client latency's: it comes
// before the server's fields, which have other names).
struct Record {
  std::string target, line;
  double Num(const std::string& key) const {
    std::smatch m;
    const std::regex re("\"" + key + "\":(-?[0-9.]+)");
    return std::regex_search(line, m, re) ? std::stod(m[1]) : -1;
  }
};

std::vector<Record> ReadRecords(const std::string& path) {
  std::ifstream f(path);
  std::vector<Record> out;
  for (std::string line; std::getline(f, line);) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex("^\\{\"target\":\"(\\w+)\"")))
      out.push_back({m[1], line});
  }
  return out;
}

// The echo floor server binary on an ephemeral loopback port.
class Floor {
 public:
  explicit Floor(const std::string& mode, std::vector<std::string> extra = {}) {
    char tmpl[] = "/tmp/kerneld-floor-XXXXXX";
    dir_ = mkdtemp(tmpl);
    const std::string ready = dir_ + "/ready";
    std::vector<std::string> args = {ECHO_FLOOR_BINARY, "--listen", "127.0.0.1:0", "--mode", mode,
                                     "--ready_file",    ready};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      execv(ECHO_FLOOR_BINARY, argv.data());
      _exit(127);
    }
    for (int i = 0; i < 500 && target_.empty(); ++i) {
      std::ifstream f(ready);
      std::string kind;
      f >> kind >> target_;
      if (target_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~Floor() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "floor server status " << status;
    std::string cmd = "rm -rf " + dir_;
    if (std::system(cmd.c_str()) != 0) std::perror("rm");
  }
  const std::string& target() const { return target_; }

 private:
  std::string dir_, target_;
  pid_t pid_ = -1;
};

std::string TempJson() {
  char tmpl[] = "/tmp/kernelctl-perf-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  return tmpl;
}

TEST(Perf, CountsMatchWhatTheServerSaw) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string json = TempJson();
  std::string out;
  ASSERT_EQ(Ctl("--target " + d.target() +
                    " perf scale --shape 16 --attr factor=2 --concurrency 1,4 --window-ms 200 "
                    "--max-windows 4 --json " +
                    json,
                &out),
            0)
      << out;
  const auto records = ReadRecords(json);
  ASSERT_EQ(records.size(), 2u) << out;
  double sent = 0;
  for (const auto& r : records) {
    EXPECT_EQ(r.target, "kerneld");
    EXPECT_EQ(r.Num("errors_total"), 0) << r.line;
    EXPECT_GT(r.Num("measured_requests"), 0) << r.line;
    EXPECT_GE(r.Num("requests_total"), r.Num("measured_requests")) << r.line;
    EXPECT_GT(r.Num("throughput"), 0) << r.line;
    EXPECT_GT(r.Num("p50"), 0) << r.line;
    EXPECT_LE(r.Num("p50"), r.Num("p90")) << r.line;
    EXPECT_LE(r.Num("p90"), r.Num("p99")) << r.line;
    EXPECT_LE(r.Num("p99"), r.Num("p999")) << r.line;
    EXPECT_GE(r.Num("windows"), 3) << r.line;
    EXPECT_LE(r.Num("windows"), 4) << r.line;
    sent += r.Num("requests_total");
  }
  EXPECT_EQ(records[0].Num("concurrency"), 1);
  EXPECT_EQ(records[1].Num("concurrency"), 4);
  EXPECT_EQ(records[1].Num("connections"), 4);
  // Every request kernelctl counted is one the daemon answered, and no
  // more: the counter may trail the last responses by a moment.
  double seen = 0;
  for (int i = 0; i < 100 && seen != sent; ++i) {
    seen = SumSeries(d.Metrics(), "kerneld_requests_total", "op=\"scale\"");
    if (seen != sent) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(seen, sent) << out;
  EXPECT_EQ(SumSeries(d.Metrics(), "kerneld_requests_total", "code=\"OK\""), sent);
  std::remove(json.c_str());
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Perf, ComparesWithTheFloorInTheSameRun) {
  // The floor is a bench target: trees built without bench (the sanitized
  // one) skip this; the normal tree runs it.
  if (access(ECHO_FLOOR_BINARY, X_OK) != 0)
    GTEST_SKIP() << "no " << ECHO_FLOOR_BINARY << " (KERNELD_BUILD_BENCH=OFF)";
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  // The sync floor in unary mode, the callback floor with streams.
  for (const auto& [floor_mode, mode] :
       std::map<std::string, std::string>{{"sync", "unary"}, {"callback", "stream"}}) {
    Floor f(floor_mode);
    ASSERT_FALSE(f.target().empty()) << floor_mode;
    const std::string json = TempJson();
    std::string out;
    ASSERT_EQ(Ctl("--target " + d.target() + " perf scale --shape 16 --attr factor=2 --mode " +
                      mode + " --concurrency 2 --window-ms 100 --max-windows 3 --compare-floor " +
                      f.target() + " --json " + json,
                  &out),
              0)
        << out;
    EXPECT_NE(out.find("(kerneld / floor)"), std::string::npos) << out;
    const auto records = ReadRecords(json);
    ASSERT_EQ(records.size(), 2u) << out;
    EXPECT_EQ(records[0].target, "kerneld");
    EXPECT_NE(records[0].line.find("\"ratio_to_floor\""), std::string::npos);
    EXPECT_GT(records[0].Num("throughput"), 0);  // the ratio's own key comes first
    EXPECT_EQ(records[1].target, "floor");
    EXPECT_GT(records[1].Num("measured_requests"), 0) << records[1].line;
    EXPECT_EQ(records[1].Num("errors_total"), 0) << records[1].line;
    EXPECT_NE(records[1].line.find("\"mode\":\"" + mode + "\""), std::string::npos);
    std::remove(json.c_str());
  }
  EXPECT_EQ(d.Terminate(), 0);
}

// --work_ns makes the floor spin that long in every request: a floor that
// does kerneld's amount of work (bench/host_ab.sh work).
TEST(Perf, FloorWorkNsSpinsInEveryRequest) {
  if (access(ECHO_FLOOR_BINARY, X_OK) != 0)
    GTEST_SKIP() << "no " << ECHO_FLOOR_BINARY << " (KERNELD_BUILD_BENCH=OFF)";
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  for (const std::string mode : {"sync", "callback"}) {
    Floor f(mode, {"--work_ns", "3000000"});
    ASSERT_FALSE(f.target().empty()) << mode;
    const std::string json = TempJson();
    std::string out;
    ASSERT_EQ(Ctl("--target " + d.target() +
                      " perf scale --shape 16 --attr factor=2 --mode unary --concurrency 1 "
                      "--window-ms 100 --max-windows 3 --compare-floor " +
                      f.target() + " --json " + json,
                  &out),
              0)
        << out;
    const auto records = ReadRecords(json);
    ASSERT_EQ(records.size(), 2u) << out;
    ASSERT_EQ(records[1].target, "floor");
    EXPECT_GT(records[1].Num("measured_requests"), 0) << records[1].line;
    // A lower bound only (spinning cannot finish early): every floor
    // request took at least the 3 ms it spun.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(records[1].line, m, std::regex("\"p50\":([0-9.]+)")))
        << records[1].line;
    EXPECT_GE(std::stod(m[1]), 3000.0) << records[1].line;
    std::remove(json.c_str());
  }
  EXPECT_EQ(d.Terminate(), 0);
  // A value that is not a count of nanoseconds is refused at start.
  for (const char* bad : {"-1", "2us", "", "99999999999999999999", "1000000000000001"}) {
    // Under timeout: a value wrongly accepted would start a floor that
    // serves until killed (exit 124, not 2).
    const std::string cmd = "timeout 10 " + std::string(ECHO_FLOOR_BINARY) +
                            " --listen 127.0.0.1:0 --work_ns '" + bad + "' 2>/dev/null";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << bad << ": " << status;
  }
}

TEST(Perf, RunStreamReportsPerRequestLatencies) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string out;
  ASSERT_EQ(
      Ctl("--target " + d.target() + " run scale --shape 16 --attr factor=2 --stream --repeat 50",
          &out),
      0)
      << out;
  EXPECT_NE(out.find("ping-pong, one request in flight"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("50 requests in ([0-9.]+) s"))) << out;
  const double elapsed_us = std::stod(m[1]) * 1e6;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("client p50 ([0-9.]+) us"))) << out;
  const double p50 = std::stod(m[1]);
  // With one request in flight the latencies do not overlap, so they add up
  // to at most the elapsed time, and half of them are >= p50: p50 <= 2 *
  // elapsed / n (+ the printed elapsed's rounding). A pipelined burst breaks
  // this: each request's "latency" then spans most of the burst.
  EXPECT_LE(p50, 2 * (elapsed_us + 500) / 50) << out;
  ASSERT_TRUE(
      std::regex_search(out, m, std::regex("first 10 p50 ([0-9.]+) us, last 10 p50 ([0-9.]+) us")))
      << out;
  // Not growing with the index (generous: the machine is shared).
  EXPECT_LT(std::stod(m[2]), 5 * std::stod(m[1]) + 2000) << out;
  // --pipeline N says so.
  ASSERT_EQ(Ctl("--target " + d.target() +
                    " run scale --shape 16 --attr factor=2 --stream --repeat 20 --pipeline 4",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("pipelined, up to 4 in flight"), std::string::npos) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(Perf, HelpAndBadOptions) {
  std::string out;
  EXPECT_EQ(Ctl("--target 127.0.0.1:1 perf --help", &out), 0) << out;
  EXPECT_NE(out.find("--compare-floor"), std::string::npos) << out;
  EXPECT_EQ(Ctl("--target 127.0.0.1:1 perf scale --concurrency 0", &out), 2) << out;
  EXPECT_EQ(Ctl("--target 127.0.0.1:1 perf scale --mode sideways", &out), 2) << out;
}

}  // namespace
}  // namespace kerneld::testing
