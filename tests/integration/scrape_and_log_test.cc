// What a client cannot do to the daemon's observability: idle or half-sent
// connections to the metrics port do not blind Prometheus, and client
// strings (request ids, op names) cannot forge request-log lines or carry
// terminal escapes into them.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <cctype>
#include <map>
#include <regex>
#include <set>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// A non-blocking TCP connection to 127.0.0.1:port (connecting or connected);
// -1 on error.
int StartConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

// Waits for fd to be ready for `events` until deadline.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// GET /metrics, connect and all, within `timeout` (as Prometheus's
// scrape_timeout bounds a scrape); "" on failure.
std::string Scrape(int port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int fd = StartConnect(port);
  if (fd < 0) return "";
  std::string out;
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  int err = 0;
  socklen_t len = sizeof err;
  if (WaitFor(fd, POLLOUT, deadline) && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
      err == 0 &&
      send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[65536];
    for (ssize_t n; WaitFor(fd, POLLIN, deadline) && (n = read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const bool complete = out.find("\r\n\r\n") != std::string::npos &&
                        out.find("kerneld_build_info") != std::string::npos;
  return std::chrono::steady_clock::now() < deadline && complete ? out : "";
}

TEST(Scrape, IdleConnectionsDoNotBlindTheScrape) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  const int silent = ConnectLoopback(d.metrics_port());
  const int half = ConnectLoopback(d.metrics_port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  const std::string partial = "GET /metr";
  ASSERT_EQ(write(half, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both accepted and waiting
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    const std::string body = Scrape(d.metrics_port(), std::chrono::milliseconds(2000));
    EXPECT_NE(body.find("kerneld_build_info"), std::string::npos)
        << "scrape " << i << " failed after "
        << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s";
  }
  close(silent);
  close(half);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// Issue 27: 40 half-sent requests held open failed every scrape for a minute
// (prometheus-cpp's exposer gave each connection one of its 8 threads). A
// thousand idle or half-open connections must not fail a scrape bounded at
// 2 s, Prometheus's usual scrape_timeout.
TEST(Scrape, AThousandHalfOpenConnectionsDoNotStarveTheScrape) {
  // The test holds the client ends: raise its descriptor limit to fit them.
  constexpr int kWanted = 1000;
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < kWanted + 200) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, kWanted + 200);
    setrlimit(RLIMIT_NOFILE, &r);
  }
  const int n = std::min<int>(kWanted, static_cast<int>(r.rlim_cur) - 200);
  ASSERT_GE(n, 40) << "RLIMIT_NOFILE too small to hold even 40 connections";
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  std::vector<int> held;
  for (int i = 0; i < n; ++i) {
    const int fd = StartConnect(d.metrics_port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    held.push_back(fd);
  }
  // Half of them send half a request; the others stay silent. Each is
  // connected (or refused) before the scrapes begin.
  const std::string partial = "GET /metrics HTTP/1.1\r\nHost: kerneld\r\nUser-Agent: slow";
  int connected = 0;
  const auto connect_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (size_t i = 0; i < held.size(); ++i) {
    if (!WaitFor(held[i], POLLOUT, connect_deadline)) break;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(held[i], SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) continue;
    ++connected;
    if (i % 2 == 1) (void)!send(held[i], partial.data(), partial.size(), MSG_NOSIGNAL);
  }
  EXPECT_GE(connected, n * 9 / 10);
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string body = Scrape(d.metrics_port(), std::chrono::milliseconds(2000));
    EXPECT_FALSE(body.empty())
        << "scrape " << i << " with " << connected << " connections held failed after "
        << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s";
  }
  for (int fd : held) close(fd);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// What is not a scrape gets a status, not a hang: other paths, methods and
// oversized requests.
TEST(Scrape, AnswersWhatIsNotAScrape) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  auto ask = [&](const std::string& req) {
    const int fd = ConnectLoopback(d.metrics_port());
    (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string out;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (ssize_t k; WaitFor(fd, POLLIN, deadline) && (k = read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<size_t>(k));
    close(fd);
    return out.substr(0, out.find("\r\n"));
  };
  EXPECT_EQ(ask("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"), "HTTP/1.1 200 OK");
  EXPECT_EQ(ask("HEAD /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK");
  EXPECT_EQ(ask("GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(ask("POST /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(ask("nonsense\r\n\r\n"), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_FALSE(Scrape(d.metrics_port(), std::chrono::milliseconds(2000)).empty());
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const std::string kEvil = "id\nkerneld: request id=FAKE op=scale code=OK\r\t\x1b[31m\x7f";

// Sends one good request with an evil id, one with an evil op name, one
// with a very long id; returns the log file's text.
std::string LogOf(const std::string& format) {
  char tmpl[] = "/tmp/kerneld-log-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string log = dir + "/requests.log";
  {
    Daemon d({"--log_level=1", "--log_format=" + format, "--log_file=" + log});
    EXPECT_TRUE(d.ok()) << d.Log();
    if (!d.ok()) return "";
    v1::ExecuteResponse resp;
    auto req = ScaleRequest(DType::kFloat32, {8}, 2.0);
    req.set_request_id(kEvil);
    EXPECT_TRUE(d.client().Execute(req, &resp).ok());
    req.set_request_id("bad-op");
    req.set_op("scale" + kEvil);
    EXPECT_EQ(d.client().Execute(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
    req.set_op("scale");
    req.set_request_id(std::string(5000, 'x'));
    EXPECT_TRUE(d.client().Execute(req, &resp).ok());
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
  }
  std::string text = ReadFile(log);
  std::system(("rm -rf " + dir).c_str());
  return text;
}

void ExpectNoControlBytes(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') continue;
    ASSERT_FALSE(c < 0x20 || c == 0x7f)
        << "raw byte 0x" << std::hex << int{c} << " at " << std::dec << i << " in:\n"
        << text;
  }
}

TEST(RequestLog, TextLogEscapesAndCutsClientStrings) {
  const std::string text = LogOf("text");
  ExpectNoControlBytes(text);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 3u) << text;  // one line per request, none forged
  for (const auto& l : lines) EXPECT_EQ(l.rfind("kerneld: request id=", 0), 0u) << l;
  EXPECT_NE(
      lines[0].find(
          "id=\"id\\nkerneld: request id=FAKE op=scale code=OK\\r\\t\\x1b[31m\\x7f\" op=scale"),
      std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("code=NOT_FOUND"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("id=" + std::string(128, 'x') + "\u2026 op=scale"), std::string::npos)
      << lines[2];
  EXPECT_EQ(lines[2].find(std::string(129, 'x')), std::string::npos);
}

TEST(RequestLog, JsonLogEscapesClientStrings) {
  const std::string text = LogOf("json");
  ExpectNoControlBytes(text);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 3u) << text;
  google::protobuf::Struct first;
  for (const auto& l : lines) {
    google::protobuf::Struct s;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(l, &s).ok()) << l;
    if (&l == &lines[0]) first = s;
  }
  EXPECT_EQ(first.fields().at("id").string_value(), kEvil);  // escaped, not altered
}

// key=value fields of a logfmt line: bare values end at a space, quoted ones
// at the closing '"' (\" and \\ inside); words without '=' are skipped.
std::vector<std::pair<std::string, std::string>> Logfmt(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t k = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '=') ++i;
    if (i >= line.size() || line[i] != '=') continue;
    std::string key = line.substr(k, i - k), value;
    ++i;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        value += line[i];
      }
      ++i;
    } else {
      while (i < line.size() && line[i] != ' ') value += line[i++];
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

// Issue 27: alice's request id "x code=OK principal=ops" made her line read
// "... code=OK total_us=3 principal=ops op=nope ... principal=alice". Values
// with a space or '=' are quoted now: each line has one of each field.
TEST(RequestLog, TextLogQuotesClientValuesSoNoFieldIsForged) {
  const std::string forged = "x code=OK principal=ops";
  char tmpl[] = "/tmp/kerneld-log-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string log = dir + "/requests.log";
  {
    Daemon d({"--log_level=3", "--log_file=" + log});
    ASSERT_TRUE(d.ok()) << d.Log();
    // Over the unix socket, so the line carries the caller's real principal.
    client::KernelClient c(d.unix_target());
    v1::ExecuteResponse resp;
    auto req = ScaleRequest(DType::kFloat32, {8}, 2.0);
    req.set_request_id(forged);
    ASSERT_TRUE(c.Execute(req, &resp).ok());
    EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
    req.set_op("nope code=OK principal=ops");
    (void)c.Execute(req, &resp);
    (*req.mutable_attrs())["mode principal"].set_s("ops\" code=OK");
    req.set_op("scale");
    (void)c.Execute(req, &resp);
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
  }
  const auto lines = Lines(ReadFile(log));
  std::system(("rm -rf " + dir).c_str());
  ASSERT_GE(lines.size(), 4u);
  int requests = 0;
  for (const auto& line : lines) {
    std::map<std::string, std::vector<std::string>> f;
    for (auto& [k, v] : Logfmt(line)) f[k].push_back(v);
    EXPECT_EQ(f["id"].size(), 1u) << line;
    EXPECT_EQ(f["id"][0], forged) << line;
    EXPECT_LE(f["principal"].size(), 1u) << line;
    for (const auto& p : f["principal"]) EXPECT_NE(p, "ops") << line;
    EXPECT_EQ(f["op"].size(), 1u) << line;
    if (line.rfind("kerneld: request ", 0) == 0) {
      ++requests;
      EXPECT_EQ(f["code"].size(), 1u) << line;
      EXPECT_EQ(f["principal"].size(), 1u) << line;
    }
  }
  EXPECT_EQ(requests, 3);
}

// Starts kerneld with stdout and stderr in files under dir; returns its pid.
pid_t Spawn(const std::vector<std::string>& flags, const std::string& dir) {
  std::vector<std::string> args = {std::getenv("KERNELD_BINARY") ? std::getenv("KERNELD_BINARY")
                                                                 : KERNELD_BINARY};
  args.insert(args.end(), flags.begin(), flags.end());
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen((dir + "/stdout").c_str(), "w");
    FILE* err = std::fopen((dir + "/stderr").c_str(), "w");
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Every line must be a JSON object with an RFC 3339 UTC "ts" and a "level";
// returns the "event" of each.
std::vector<std::string> ExpectJsonLines(const std::string& text, const std::string& what) {
  static const std::regex ts(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");
  std::vector<std::string> events;
  for (const auto& line : Lines(text)) {
    google::protobuf::Struct s;
    if (!google::protobuf::util::JsonStringToMessage(line, &s).ok()) {
      ADD_FAILURE() << what << ": not JSON: " << line;
      continue;
    }
    const auto& f = s.fields();
    EXPECT_TRUE(f.count("ts") && std::regex_match(f.at("ts").string_value(), ts))
        << what << ": " << line;
    static const std::set<std::string> levels = {"debug", "info", "warn", "error"};
    EXPECT_TRUE(f.count("level") && levels.count(f.at("level").string_value()))
        << what << ": " << line;
    events.push_back(f.count("event") ? f.at("event").string_value() : "");
  }
  return events;
}

// Issue 26: JSON request lines had no time or level, and the start-up and
// drain lines stayed plain text. With --log_format=json every line kerneld
// writes, on stdout and on stderr, is JSON with "ts" and "level".
TEST(Logging, JsonFormatMakesEveryLineJsonWithTimeAndLevel) {
  char tmpl[] = "/tmp/kerneld-json-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string ready = dir + "/ready";
  const pid_t pid =
      Spawn({"--log_format=json", "--log_level=5", "--listen=127.0.0.1:0", "--listen=0.0.0.0:0",
             "--allow_insecure_remote", "--metrics_listen=127.0.0.1:0", "--ready_file=" + ready},
            dir);
  std::string target;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       target.empty() && std::chrono::steady_clock::now() < deadline;) {
    std::ifstream f(ready);
    for (std::string k, v; f >> k >> v;)
      if (k == "grpc" && target.empty()) target = v;
    if (target.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(target.empty()) << ReadFile(dir + "/stderr");
  {
    client::KernelClient c(target);
    v1::ExecuteResponse resp;
    auto req = ScaleRequest(DType::kFloat32, {8}, 2.0);
    req.set_request_id("j \"quoted\" \n id");
    EXPECT_TRUE(c.Execute(req, &resp).ok());
    (*req.mutable_attrs())["factor"].set_f(NAN);  // JSON has no NaN: the line still parses
    (*req.mutable_attrs())["we\"ird"].set_s("v");
    (void)c.Execute(req, &resp);
    req.set_op("no_such_op");
    (void)c.Execute(req, &resp);
  }
  kill(pid, SIGHUP);  // no --auth_tokens: an error line
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  const auto out = ExpectJsonLines(ReadFile(dir + "/stdout"), "stdout");
  const auto err = ExpectJsonLines(ReadFile(dir + "/stderr"), "stderr");
  auto has = [](const std::vector<std::string>& v, const char* e) {
    return std::count(v.begin(), v.end(), e);
  };
  EXPECT_EQ(has(out, "listening"), 2) << ReadFile(dir + "/stdout");
  EXPECT_EQ(has(out, "metrics_listening"), 1);
  for (const char* e : {"insecure_listen", "reload_failed", "draining", "drained", "stopped"})
    EXPECT_EQ(has(err, e), 1) << e << "\n" << ReadFile(dir + "/stderr");
  EXPECT_EQ(has(err, "request"), 3) << ReadFile(dir + "/stderr");
  EXPECT_GE(has(err, "start"), 1) << ReadFile(dir + "/stderr");
  // A flag error, before anything else starts, is JSON too.
  const pid_t bad = Spawn({"--log_format=json", "--no_such_flag=1"}, dir);
  EXPECT_EQ(WaitExit(bad), 2);
  EXPECT_EQ(ExpectJsonLines(ReadFile(dir + "/stderr"), "bad flag").size(), 1u)
      << ReadFile(dir + "/stderr");
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace kerneld::testing
