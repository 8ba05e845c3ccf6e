// Integration-test fixture: starts the real kerneld binary on an ephemeral
// loopback port (and a unix socket), waits for its ready file, and talks to
// it through the real client library. Teardown sends SIGTERM and checks the
// daemon exits 0; a sanitizer report in its stderr fails the test.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client.h"
#include "tensor_util.h"

namespace kerneld::testing {

// Built with ThreadSanitizer: every access costs ~5-20x, and each race it
// sees and suppresses (tests/tsan.supp) symbolizes two stacks, so the
// hostile-size cases shrink there (they still cross the bound they test).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif
#else
inline constexpr bool kThreadSanitized = false;
#endif

namespace v1 = ::kerneld::v1;

// A TCP connection to 127.0.0.1:port; -1 when refused.
inline int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class Daemon {
 public:
  explicit Daemon(std::vector<std::string> extra_flags = {}, bool with_unix = true) {
    char dir_tmpl[] = "/tmp/kerneld-test-XXXXXX";
    dir_ = mkdtemp(dir_tmpl);
    ready_ = dir_ + "/ready";
    if (with_unix) unix_ = "unix:" + dir_ + "/kerneld.sock";
    // KERNELD_BINARY in the environment overrides the build tree's daemon
    // (the packaged tests on the GPU machine run the packaged binary).
    const char* bin_env = std::getenv("KERNELD_BINARY");
    std::vector<std::string> args = {bin_env ? bin_env : KERNELD_BINARY, "--listen=127.0.0.1:0",
                                     "--metrics_listen=127.0.0.1:0", "--ready_file=" + ready_};
    if (with_unix) args.push_back("--listen=" + unix_);
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    log_ = dir_ + "/stderr.log";
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      dup2(fileno(f), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream f(ready_);
      std::string kind, value;
      while (f >> kind >> value) {
        if (kind == "grpc" && value.rfind("unix", 0) != 0) target_ = value;
        if (kind == "metrics") metrics_port_ = std::stoi(value);
      }
      if (!target_.empty()) break;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!target_.empty()) client_ = std::make_unique<client::KernelClient>(target_);
  }

  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    // A sanitized daemon (scripts/test's sanitizer stage) halts on its first
    // report and exits non-zero, which Terminate() returns; LeakSanitizer
    // reports at exit (status 23). Whatever the test checked, a report in
    // the daemon's stderr fails it.
    if (std::string report = SanitizerReport(); !report.empty())
      ADD_FAILURE() << "kerneld wrote a sanitizer report:\n" << report;
    std::string cmd = "rm -rf " + dir_;
    if (std::system(cmd.c_str()) != 0) std::perror("rm");
  }

  bool ok() const { return client_ != nullptr; }
  client::KernelClient& client() { return *client_; }
  // A client on the daemon's unix socket: its principal is the test's uid
  // (SO_PEERCRED), which may register the test's own 0600 shared memory; an
  // anonymous TCP caller may not (docs/security.md).
  client::KernelClient& unix_client() {
    if (unix_client_ == nullptr) unix_client_ = std::make_unique<client::KernelClient>(unix_);
    return *unix_client_;
  }
  const std::string& target() const { return target_; }
  const std::string& unix_target() const { return unix_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  // Values of the ready file's lines of `kind` ("grpc", "grpc_tls", ...).
  std::vector<std::string> Ready(const std::string& kind) const {
    std::ifstream f(ready_);
    std::vector<std::string> out;
    std::string k, v;
    while (f >> k >> v)
      if (k == kind) out.push_back(v);
    return out;
  }
  std::string Log() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // The daemon's ASan / LSan / UBSan / TSan report (from its first line), or "".
  std::string SanitizerReport() const {
    const std::string log = Log();
    size_t at = std::string::npos;
    for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: ",
                               "UndefinedBehaviorSanitizer", "WARNING: ThreadSanitizer"})
      at = std::min(at, log.find(marker));
    if (at == std::string::npos) return "";
    at = log.rfind('\n', at);
    return log.substr(at == std::string::npos ? 0 : at + 1);
  }

  // SIGTERM and wait; returns the exit status (or -1 on signal / timeout).
  int Terminate(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  bool Serving() {
    bool serving = false;
    return client_->Health("", &serving).ok() && serving;
  }

  // GET /metrics from the exposer.
  std::string Metrics() const {
    const int fd = ConnectLoopback(metrics_port_);
    if (fd < 0) return "";
    std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, req.data(), req.size()) < 0) return "";
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    close(fd);
    return out;
  }

 private:
  std::string dir_, ready_, unix_, log_, target_;
  int metrics_port_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<client::KernelClient> client_, unix_client_;
};

// Runs a shell command; returns its exit status (-1 if it did not exit) and
// fills *out with its stdout and stderr.
inline int RunCapture(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  out->clear();
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Value of the first exposition line of `name` carrying all `labels`
// (label order does not matter); nullopt when there is none.
inline std::optional<double> SeriesValue(const std::string& exposition, const std::string& name,
                                         const std::vector<std::string>& labels) {
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0 && line.rfind(name + " ", 0) != 0) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

inline v1::ExecuteRequest ScaleRequest(DType dt, std::vector<int64_t> shape, double factor,
                                       client::HostTensor* x_out = nullptr, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  client::HostTensor x = client::Random(dt, std::move(shape), rng);
  v1::ExecuteRequest req;
  req.set_op("scale");
  client::ToProto(x, &(*req.mutable_inputs())["x"]);
  (*req.mutable_attrs())["factor"].set_f(factor);
  if (x_out) *x_out = x;
  return req;
}

}  // namespace kerneld::testing
