// kerneld's metrics as Prometheus sees them: the exposition passes
// `promtool check metrics`; a real Prometheus server scraping a real kerneld
// every second reports the request counts and latency quantiles the test
// produced; label values never come from client input.
//
// Needs Debian's `prometheus` package (promtool and prometheus on PATH, or
// PROMTOOL / PROMETHEUS_BINARY in the environment). CI installs it with
// scripts/bootstrap --with-prometheus; where it is missing these tests FAIL.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/time.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "buffers.h"
#include "daemon_fixture.h"
#include "lane_client.h"

namespace kerneld::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string Tool(const char* env, const char* name) {
  const char* v = std::getenv(env);
  return v && *v ? v : name;
}

bool Runnable(const std::string& tool) {
  std::string cmd = "command -v '" + tool + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

#define REQUIRE_TOOL(tool)                                                           \
  ASSERT_TRUE(Runnable(tool)) << "'" << (tool)                                       \
                              << "' not found: install Debian's prometheus package " \
                              << "(scripts/bootstrap --with-prometheus)"

// A free loopback TCP port (bound, read back, released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int port = 0;
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

struct HttpResponse {
  int status = 0;  // 0: no answer
  std::string body;
};

// HTTP/1.0 GET on 127.0.0.1:port with a 5 s socket timeout.
HttpResponse HttpGet(int port, const std::string& path) {
  HttpResponse r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return r;
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return r;
  }
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t sp = raw.find(' ');
  size_t hdr_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/", 0) != 0 || sp == std::string::npos || hdr_end == std::string::npos)
    return r;
  r.status = std::atoi(raw.c_str() + sp + 1);
  r.body = raw.substr(hdr_end + 4);
  return r;
}

// The exposition without the HTTP status line and headers.
std::string Body(const std::string& http) {
  size_t p = http.find("\r\n\r\n");
  return p == std::string::npos ? http : http.substr(p + 4);
}

std::string UrlEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// One sample of an instant-vector answer from /api/v1/query.
struct Sample {
  std::map<std::string, std::string> labels;
  std::string value;  // as Prometheus writes it: "300", "0.0012", "NaN", "+Inf"
  double number() const { return std::strtod(value.c_str(), nullptr); }
};

// Minimal parser for {"status":"success","data":{"resultType":"vector",
// "result":[{"metric":{"k":"v",...},"value":[ts,"v"]},...]}}. Label values
// here never hold quotes or braces. nullopt if the answer is not a vector.
std::optional<std::vector<Sample>> ParseVector(const std::string& json) {
  if (json.find("\"status\":\"success\"") == std::string::npos ||
      json.find("\"resultType\":\"vector\"") == std::string::npos)
    return std::nullopt;
  std::vector<Sample> out;
  for (size_t p = 0; (p = json.find("\"metric\":{", p)) != std::string::npos;) {
    p += 10;
    size_t end = json.find('}', p);
    if (end == std::string::npos) return std::nullopt;
    Sample s;
    std::string m = json.substr(p, end - p);  // "k":"v","k2":"v2"
    for (size_t q = 0; (q = m.find('"', q)) != std::string::npos;) {
      size_t k_end = m.find('"', q + 1);
      size_t v_start = m.find('"', k_end + 1);
      size_t v_end = m.find('"', v_start + 1);
      if (k_end == std::string::npos || v_start == std::string::npos || v_end == std::string::npos)
        return std::nullopt;
      s.labels[m.substr(q + 1, k_end - q - 1)] = m.substr(v_start + 1, v_end - v_start - 1);
      q = v_end + 1;
    }
    size_t v = json.find("\"value\":[", end);
    if (v == std::string::npos) return std::nullopt;
    size_t open = json.find(",\"", v);
    size_t close_q = json.find('"', open + 2);
    if (open == std::string::npos || close_q == std::string::npos) return std::nullopt;
    s.value = json.substr(open + 2, close_q - open - 2);
    out.push_back(std::move(s));
    p = close_q;
  }
  return out;
}

// A real Prometheus server on a free loopback port, scraping one kerneld's
// metrics port every second, with its own config and TSDB in a temp dir.
// SIGTERM (then SIGKILL) on destruction; it dies with the test process too.
class PrometheusServer {
 public:
  explicit PrometheusServer(int target_port) {
    char tmpl[] = "/tmp/kerneld-prom-XXXXXX";
    dir_ = mkdtemp(tmpl);
    config_ = dir_ + "/prometheus.yml";
    std::ofstream(config_) << "global:\n"
                              "  scrape_interval: 1s\n"
                              "  evaluation_interval: 1s\n"
                              "scrape_configs:\n"
                              "  - job_name: kerneld\n"
                              "    scrape_interval: 1s\n"
                              "    scrape_timeout: 1s\n"
                              "    static_configs:\n"
                              "      - targets: [\"127.0.0.1:"
                           << target_port << "\"]\n";
  }

  ~PrometheusServer() {
    Stop();
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::perror("rm");
  }

  // Starts the server and waits (bounded) for /-/ready; retries on a port
  // lost to a race. Empty on success, else why (with the server's log).
  std::string Start() {
    std::string why;
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = FreePort();
      why = StartOnce();
      if (why.empty()) return "";
      Stop();
    }
    return why;
  }

  int port() const { return port_; }

  std::string Log() const {
    std::ifstream f(dir_ + "/prometheus.log");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // GET /api/v1/query?query=expr (evaluated now); the raw JSON.
  HttpResponse Query(const std::string& expr) const {
    return HttpGet(port_, "/api/v1/query?query=" + UrlEncode(expr));
  }
  std::optional<std::vector<Sample>> QueryVector(const std::string& expr) const {
    HttpResponse r = Query(expr);
    if (r.status != 200) return std::nullopt;
    return ParseVector(r.body);
  }
  HttpResponse Get(const std::string& path) const { return HttpGet(port_, path); }

 private:
  std::string StartOnce() {
    std::string bin = Tool("PROMETHEUS_BINARY", "prometheus");
    std::vector<std::string> args = {
        bin, "--config.file=" + config_, "--storage.tsdb.path=" + dir_ + "/data",
        "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=info"};
    std::string log = dir_ + "/prometheus.log";
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    if (pid_ < 0) return "fork failed";
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "prometheus exited during start-up:\n" + Log();
      }
      if (HttpGet(port_, "/-/ready").status == 200) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "prometheus not ready after 30 s:\n" + Log();
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::string dir_, config_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Polls `pred` every 200 ms until it holds or `limit` passes.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return pred();
}

// Sends `ok` good scale requests, `unknown_op` with an unregistered op name
// and `missing_attr` scale requests without their factor; checks each code.
void SendLoad(client::KernelClient& c, int ok, int unknown_op, int missing_attr, int* seq) {
  for (int i = 0; i < ok; ++i) {
    auto req = ScaleRequest(i % 2 ? DType::kFloat16 : DType::kFloat32, {1 + i % 5, 64}, 1.5,
                            nullptr, static_cast<uint64_t>(++*seq));
    req.set_backend("cpu");  // the same labels on a machine with GPUs
    v1::ExecuteResponse resp;
    grpc::Status st = c.Execute(req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  for (int i = 0; i < unknown_op; ++i) {
    auto req = ScaleRequest(DType::kFloat32, {4}, 2.0, nullptr, static_cast<uint64_t>(++*seq));
    req.set_op("evil_op_12345_" + std::to_string(*seq));  // every one a different name
    v1::ExecuteResponse resp;
    EXPECT_EQ(c.Execute(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  for (int i = 0; i < missing_attr; ++i) {
    auto req = ScaleRequest(DType::kFloat32, {4}, 2.0, nullptr, static_cast<uint64_t>(++*seq));
    req.mutable_attrs()->clear();
    v1::ExecuteResponse resp;
    EXPECT_EQ(c.Execute(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
}

std::map<std::string, double> ByLabel(const std::vector<Sample>& v, const std::string& label) {
  std::map<std::string, double> out;
  for (const auto& s : v) out[s.labels.count(label) ? s.labels.at(label) : ""] = s.number();
  return out;
}

std::string Show(const std::map<std::string, double>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += k + "=" + std::to_string(v) + " ";
  return s;
}

// ---------------------------------------------------------------------------

TEST(PrometheusExposition, PassesPromtoolCheckMetrics) {
  const std::string promtool = Tool("PROMTOOL", "promtool");
  REQUIRE_TOOL(promtool);
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  ASSERT_GT(d.metrics_port(), 0);
  int seq = 0;
  SendLoad(d.client(), 20, 3, 2, &seq);  // every histogram and code family populated
  // One request through a registered shared-memory buffer: 4096 bytes in
  // and 4096 out on path="buffer", and a buffer for the buffer gauges.
  client::SharedMemoryBuffer shm(d.unix_client(), 8192);
  ASSERT_TRUE(shm.status().ok()) << shm.status().error_message();
  {
    client::HostTensor x;
    auto req = ScaleRequest(DType::kFloat32, {1024}, 2.0, &x);
    for (size_t i = 0; i < x.values.size(); ++i) {
      float f = static_cast<float>(x.values[i]);
      std::memcpy(shm.data() + 4 * i, &f, 4);
    }
    (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {1024}, 0);
    (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {1024}, 4096);
    req.set_backend("cpu");
    v1::ExecuteResponse resp;
    grpc::Status st = d.unix_client().Execute(req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  std::string http = d.Metrics();
  ASSERT_NE(http.find(" 200 "), std::string::npos) << http.substr(0, 200);
  std::string body = Body(http);

  char tmpl[] = "/tmp/kerneld-metrics-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
  close(fd);
  std::string cmd = "'" + promtool + "' check metrics < " + tmpl + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  int rc = pclose(p);
  std::remove(tmpl);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "promtool check metrics: " << out << "\n"
                                                     << body;

  // Every family the issue names, with its type (utilization only where
  // NVML sees a GPU).
  const std::vector<std::pair<std::string, std::string>> families = {
      {"kerneld_request_duration_seconds", "histogram"},
      {"kerneld_queue_duration_seconds", "histogram"},
      {"kerneld_execute_duration_seconds", "histogram"},
      {"kerneld_requests_total", "counter"},
      {"kerneld_transferred_bytes_total", "counter"},
      {"kerneld_inflight_requests", "gauge"},
      {"kerneld_queue_depth", "gauge"},
      {"kerneld_buffers", "gauge"},
      {"kerneld_buffer_bytes", "gauge"},
      {"kerneld_device_memory_bytes", "gauge"},
      {"kerneld_device_healthy", "gauge"},
      {"kerneld_build_info", "gauge"},
      // The standard process collector's series (issue 26), and those
      // prometheus-cpp's exposer exported, kept when it was replaced.
      {"process_cpu_seconds_total", "counter"},
      {"process_resident_memory_bytes", "gauge"},
      {"process_virtual_memory_bytes", "gauge"},
      {"process_open_fds", "gauge"},
      {"process_max_fds", "gauge"},
      {"process_start_time_seconds", "gauge"},
      {"exposer_transferred_bytes_total", "counter"},
      {"exposer_scrapes_total", "counter"},
      {"exposer_request_latencies", "summary"},
  };
  for (const auto& [name, type] : families)
    EXPECT_NE(body.find("# TYPE " + name + " " + type + "\n"), std::string::npos) << name << "\n"
                                                                                  << body;
  // process_* describe this daemon: compare with what /proc says of it.
  {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const double start = SeriesValue(body, "process_start_time_seconds", {}).value_or(0);
    EXPECT_GT(start, now - 600) << body;  // started by this test, not at boot
    EXPECT_LE(start, now + 1) << body;
    const double fds = SeriesValue(body, "process_open_fds", {}).value_or(0);
    EXPECT_GE(fds, 5);  // std streams, the listeners, epoll
    EXPECT_LE(fds, SeriesValue(body, "process_max_fds", {}).value_or(0));
    std::ifstream status("/proc/" + std::to_string(d.pid()) + "/status");
    double vm_rss_kb = 0;
    for (std::string key; status >> key;)
      if (key == "VmRSS:")
        status >> vm_rss_kb;
      else
        status.ignore(1 << 16, '\n');
    const double rss = SeriesValue(body, "process_resident_memory_bytes", {}).value_or(0);
    EXPECT_GT(rss, vm_rss_kb * 1024 / 2) << "VmRSS " << vm_rss_kb << " kB";
    EXPECT_LT(rss, vm_rss_kb * 1024 * 2) << "VmRSS " << vm_rss_kb << " kB";
    EXPECT_GE(SeriesValue(body, "process_virtual_memory_bytes", {}).value_or(0), rss);
    // CPU time (in clock ticks: 0 until the first 10 ms) within what the
    // cores could have given it since it started.
    const double cpu = SeriesValue(body, "process_cpu_seconds_total", {}).value_or(-1);
    EXPECT_GE(cpu, 0) << body;
    EXPECT_LE(cpu, (now - start) * std::thread::hardware_concurrency() + 0.1) << body;
  }

  // Fixed buckets: 5e-6 * 2^k s for k = 0..21, then +Inf.
  std::vector<double> les;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("kerneld_request_duration_seconds_bucket{", 0) != 0) continue;
    if (line.find("op=\"scale\"") == std::string::npos ||
        line.find("code=\"OK\"") == std::string::npos)
      continue;
    size_t le = line.find("le=\"");
    ASSERT_NE(le, std::string::npos) << line;
    std::string v = line.substr(le + 4, line.find('"', le + 4) - le - 4);
    les.push_back(v == "+Inf" ? INFINITY : std::stod(v));
  }
  ASSERT_EQ(les.size(), 23u) << body;
  for (int k = 0; k < 22; ++k)
    EXPECT_NEAR(les[static_cast<size_t>(k)], 5e-6 * std::ldexp(1.0, k), 1e-9 * std::ldexp(1.0, k))
        << k;
  EXPECT_TRUE(std::isinf(les[22]));

  // Rejected before scheduling: backend and device "none"; unknown op "_unknown".
  EXPECT_EQ(
      SeriesValue(body, "kerneld_requests_total",
                  {"op=\"_unknown\"", "backend=\"none\"", "device=\"none\"", "code=\"NOT_FOUND\""}),
      3.0)
      << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_requests_total",
                        {"op=\"scale\"", "backend=\"none\"", "device=\"none\"",
                         "code=\"INVALID_ARGUMENT\""}),
            2.0)
      << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_requests_total",
                        {"op=\"scale\"", "backend=\"cpu\"", "device=\"cpu\"", "code=\"OK\""}),
            21.0)
      << body;
  // Transfers and buffers.
  EXPECT_EQ(
      SeriesValue(body, "kerneld_transferred_bytes_total", {"direction=\"in\"", "path=\"buffer\""}),
      4096.0)
      << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_transferred_bytes_total",
                        {"direction=\"out\"", "path=\"buffer\""}),
            4096.0)
      << body;
  EXPECT_GT(
      SeriesValue(body, "kerneld_transferred_bytes_total", {"direction=\"in\"", "path=\"inline\""})
          .value_or(0),
      0.0)
      << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_buffers", {"kind=\"shared_memory\""}), 1.0) << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_buffers", {"kind=\"cuda_ipc\""}), 0.0) << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_buffer_bytes", {"kind=\"shared_memory\"", "device=\"cpu\""}),
            8192.0)
      << body;
  // Device gauges for the cpu device.
  EXPECT_EQ(SeriesValue(body, "kerneld_device_healthy", {"device=\"cpu\""}), 1.0) << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_queue_depth", {"device=\"cpu\""}), 0.0) << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_inflight_requests", {"device=\"cpu\""}), 0.0) << body;
  EXPECT_GT(SeriesValue(body, "kerneld_device_memory_bytes", {"device=\"cpu\"", "state=\"total\""})
                .value_or(0),
            0.0)
      << body;
  EXPECT_TRUE(SeriesValue(body, "kerneld_device_memory_bytes", {"device=\"cpu\"", "state=\"used\""})
                  .has_value())
      << body;
  EXPECT_EQ(SeriesValue(body, "kerneld_build_info", {"version=\"", "revision=\"", "cuda=\""}), 1.0)
      << body;
  EXPECT_TRUE(shm.Unregister().ok());
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(PrometheusServer, ScrapesCountsAndQuantilesMatchTheLoad) {
  REQUIRE_TOOL(Tool("PROMETHEUS_BINARY", "prometheus"));
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  ASSERT_GT(d.metrics_port(), 0);
  PrometheusServer prom(d.metrics_port());
  std::string why = prom.Start();
  ASSERT_EQ(why, "");

  // Phase 1: a little of every kind, and wait until Prometheus has it, so
  // that every series has a sample before the main load (rate() needs two).
  int seq = 0;
  SendLoad(d.client(), 10, 5, 2, &seq);
  const std::string counts = "sum by (code) (kerneld_requests_total{job=\"kerneld\"})";
  std::map<std::string, double> got;
  auto counts_are = [&](std::map<std::string, double> want) {
    auto v = prom.QueryVector(counts);
    if (!v) return false;
    got = ByLabel(*v, "code");
    return got == want;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return counts_are({{"OK", 10}, {"NOT_FOUND", 5}, {"INVALID_ARGUMENT", 2}});
      },
      std::chrono::seconds(30)))
      << "Prometheus has " << Show(got) << "\n"
      << prom.Log();

  // Phase 2: the rest, over more than one scrape interval.
  SendLoad(d.client(), 145, 20, 8, &seq);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  SendLoad(d.client(), 145, 25, 10, &seq);
  // Totals: 300 OK, 50 unknown op, 20 missing attr.
  ASSERT_TRUE(WaitFor(
      [&] {
        return counts_are({{"OK", 300}, {"NOT_FOUND", 50}, {"INVALID_ARGUMENT", 20}});
      },
      std::chrono::seconds(30)))
      << "Prometheus has " << Show(got) << "\n"
      << Body(d.Metrics());
  // Two more scrapes after the load, whatever the phase of the scrape loop.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));

  // Per op, backend, device and code: failures land under their code, and
  // those rejected before scheduling under backend="none", device="none".
  auto v = prom.QueryVector(
      "sum by (op, backend, device, code) (kerneld_requests_total{job=\"kerneld\"})");
  ASSERT_TRUE(v.has_value());
  std::map<std::string, double> by_series;
  for (const auto& s : *v)
    by_series[s.labels.at("op") + "/" + s.labels.at("backend") + "/" + s.labels.at("device") + "/" +
              s.labels.at("code")] = s.number();
  EXPECT_EQ(by_series, (std::map<std::string, double>{{"scale/cpu/cpu/OK", 300},
                                                      {"_unknown/none/none/NOT_FOUND", 50},
                                                      {"scale/none/none/INVALID_ARGUMENT", 20}}))
      << Show(by_series);

  // The histogram's _count agrees with the counter.
  auto hc =
      prom.QueryVector("sum by (code) (kerneld_request_duration_seconds_count{job=\"kerneld\"})");
  ASSERT_TRUE(hc.has_value());
  EXPECT_EQ(ByLabel(*hc, "code"), (std::map<std::string, double>{
                                      {"OK", 300}, {"NOT_FOUND", 50}, {"INVALID_ARGUMENT", 20}}));

  // p99 by op over the last 30 s: finite and positive for both ops, and
  // within the histogram's range (5 us .. 10.5 s).
  auto q = prom.QueryVector(
      "histogram_quantile(0.99, sum by (le, op) "
      "(rate(kerneld_request_duration_seconds_bucket[30s])))");
  ASSERT_TRUE(q.has_value()) << prom.Query(
                                        "histogram_quantile(0.99, sum by (le, op) "
                                        "(rate(kerneld_request_duration_seconds_bucket[30s])))")
                                    .body;
  std::map<std::string, double> p99 = ByLabel(*q, "op");
  EXPECT_EQ(p99.size(), 2u) << Show(p99);
  for (const char* op : {"scale", "_unknown"}) {
    ASSERT_TRUE(p99.count(op)) << op << " " << Show(p99);
    double x = p99[op];
    EXPECT_TRUE(std::isfinite(x) && x > 0 && x <= 10.48576) << op << " p99=" << x;
  }

  // Queue and execution time exist for the requests that ran.
  for (const char* h : {"kerneld_queue_duration_seconds", "kerneld_execute_duration_seconds"}) {
    auto c = prom.QueryVector(std::string("sum by (op, backend, device) (") + h +
                              "_count{job=\"kerneld\"})");
    ASSERT_TRUE(c.has_value()) << h;
    ASSERT_EQ(c->size(), 1u) << h;
    EXPECT_EQ((*c)[0].labels.at("op"), "scale") << h;
    EXPECT_EQ((*c)[0].labels.at("device"), "cpu") << h;
    EXPECT_EQ((*c)[0].number(), 300) << h;
  }

  // 70 distinct client-chosen op names, and not one became a label value.
  HttpResponse ops = prom.Get("/api/v1/label/op/values");
  ASSERT_EQ(ops.status, 200) << ops.body;
  EXPECT_EQ(ops.body.find("evil"), std::string::npos) << ops.body;
  EXPECT_NE(ops.body.find("\"_unknown\""), std::string::npos) << ops.body;
  auto n = prom.QueryVector("count({__name__=~\"kerneld_.*\", op=~\".*evil.*\"})");
  ASSERT_TRUE(n.has_value());
  EXPECT_TRUE(n->empty()) << "series with a client-chosen op label";

  // The daemon is one healthy target.
  auto up = prom.QueryVector("up{job=\"kerneld\"}");
  ASSERT_TRUE(up.has_value());
  ASSERT_EQ(up->size(), 1u);
  EXPECT_EQ((*up)[0].number(), 1);
  EXPECT_EQ(d.Terminate(), 0);
}

// The request series carry `transport` (grpc|lane): the same request over
// the same-host lane and over gRPC lands in two series that Prometheus,
// scraping the daemon, tells apart; every request series has the label.
TEST(PrometheusServer, RequestSeriesSayWhichTransport) {
  REQUIRE_TOOL(Tool("PROMETHEUS_BINARY", "prometheus"));
  char tmpl[] = "/tmp/kerneld-prom-lane-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string lane_path = dir + "/lane.sock";
  {
    Daemon d({"--lane_socket=" + lane_path});
    ASSERT_TRUE(d.ok()) << d.Log();
    PrometheusServer prom(d.metrics_port());
    ASSERT_EQ(prom.Start(), "");
    grpc::Status st;
    auto lane = client::LaneClient::Connect(lane_path, "", &st);
    ASSERT_TRUE(lane) << st.error_message();
    auto run = [](auto&& execute, int ok, int bad) {
      for (int i = 0; i < ok + bad; ++i) {
        auto req = ScaleRequest(DType::kFloat32, {64}, 1.5, nullptr, static_cast<uint64_t>(i));
        req.set_backend("cpu");
        if (i >= ok) req.mutable_attrs()->clear();  // no factor: INVALID_ARGUMENT
        v1::ExecuteResponse resp;
        const grpc::Status s = execute(req, &resp);
        EXPECT_EQ(s.ok(), i < ok) << s.error_message();
      }
    };
    run([&](const v1::ExecuteRequest& r, v1::ExecuteResponse* o) { return lane->Execute(r, o); }, 7,
        2);
    run([&](const v1::ExecuteRequest& r,
            v1::ExecuteResponse* o) { return d.unix_client().Execute(r, o); },
        5, 3);

    const std::map<std::string, double> want = {
        {"lane/OK", 7}, {"lane/INVALID_ARGUMENT", 2}, {"grpc/OK", 5}, {"grpc/INVALID_ARGUMENT", 3}};
    std::map<std::string, double> got;
    auto by = [&](const std::string& expr) {
      got.clear();
      if (auto v = prom.QueryVector(expr))
        for (const auto& x : *v)
          got[(x.labels.count("transport") ? x.labels.at("transport") : "none") + "/" +
              x.labels.at("code")] = x.number();
      return got;
    };
    ASSERT_TRUE(WaitFor(
        [&] {
          return by("sum by (transport, code) (kerneld_requests_total{op=\"scale\"})") == want;
        },
        std::chrono::seconds(30)))
        << Show(got) << "\n"
        << Body(d.Metrics());
    EXPECT_EQ(by("sum by (transport, code) (kerneld_request_duration_seconds_count{op=\"scale\"})"),
              want);
    for (const char* h :
         {"kerneld_queue_duration_seconds_count", "kerneld_execute_duration_seconds_count"}) {
      auto v = prom.QueryVector(std::string("sum by (transport) (") + h + "{op=\"scale\"})");
      ASSERT_TRUE(v.has_value()) << h;
      EXPECT_EQ(ByLabel(*v, "transport"), (std::map<std::string, double>{{"lane", 7}, {"grpc", 5}}))
          << h;
    }
    // The lane's own counter agrees with the request series.
    EXPECT_EQ(SeriesValue(d.Metrics(), "kerneld_lane_requests_total", {"code=\"OK\""}), 7);
    // Every request series line carries one of the two values.
    std::istringstream in(Body(d.Metrics()));
    int lines = 0;
    for (std::string line; std::getline(in, line);) {
      for (const char* f :
           {"kerneld_requests_total{", "kerneld_request_duration_seconds_bucket{",
            "kerneld_queue_duration_seconds_count{", "kerneld_execute_duration_seconds_count{"}) {
        if (line.rfind(f, 0) != 0) continue;
        ++lines;
        EXPECT_TRUE(line.find("transport=\"grpc\"") != std::string::npos ||
                    line.find("transport=\"lane\"") != std::string::npos)
            << line;
      }
    }
    EXPECT_GT(lines, 8);
    lane.reset();
    EXPECT_EQ(d.Terminate(), 0);
  }
  std::filesystem::remove_all(dir);
}

TEST(PrometheusLabels, ClientInputNeverBecomesALabelValue) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string evil = "evil_op_12345";
  int sent = 0;
  auto send = [&](v1::ExecuteRequest req) {
    v1::ExecuteResponse resp;
    (void)d.client().Execute(req, &resp);
    ++sent;
  };
  // Many distinct unknown ops: still one "_unknown" series.
  for (int i = 0; i < 100; ++i) {
    auto req = ScaleRequest(DType::kFloat32, {8}, 2.0);
    req.set_op(i == 0 ? evil : evil + "_" + std::to_string(i));
    send(req);
  }
  // Client input in every other free-form field of a request.
  auto req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  req.set_request_id(evil + "_id");
  send(req);
  req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  req.set_backend(evil + "_backend");
  send(req);
  req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  req.set_device(evil + "_device");
  send(req);
  req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  (*req.mutable_attrs())[evil + "_attr"].set_f(1.0);
  send(req);
  req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  v1::Tensor x = req.inputs().at("x");
  (*req.mutable_inputs())[evil + "_input"] = x;
  send(req);
  req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  x = req.inputs().at("x");
  (*req.mutable_outputs())[evil + "_output"] = x;
  send(req);
  req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  req.set_op("scale\"} 1\nkerneld_injected{x=\"" + evil);  // exposition-format injection attempt
  send(req);

  std::string body = Body(d.Metrics());
  ASSERT_NE(body.find("kerneld_requests_total"), std::string::npos) << body;
  EXPECT_EQ(body.find("evil"), std::string::npos) << body;
  EXPECT_EQ(body.find("kerneld_injected"), std::string::npos) << body;

  // Every request counted, under a handful of bounded label sets.
  std::istringstream in(body);
  double total = 0;
  int series = 0;
  std::set<std::string> op_values;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("kerneld_requests_total{", 0) != 0) continue;
    ++series;
    total += std::stod(line.substr(line.rfind(' ') + 1));
    size_t op = line.find("op=\"");
    if (op != std::string::npos)
      op_values.insert(line.substr(op + 4, line.find('"', op + 4) - op - 4));
  }
  EXPECT_EQ(total, static_cast<double>(sent)) << body;
  EXPECT_LE(series, 6) << body;
  EXPECT_EQ(op_values, (std::set<std::string>{"_unknown", "scale"})) << body;
  EXPECT_EQ(d.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
