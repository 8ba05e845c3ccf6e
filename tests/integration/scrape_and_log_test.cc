// What a client cannot do to the daemon's observability: idle or half-sent
// connections to the metrics port do not blind Prometheus, and client
// strings (request ids, op names) cannot forge request-log lines or carry
// terminal escapes into them.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <sys/time.h>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// GET /metrics, giving up after `timeout`; "" on failure.
std::string Scrape(int port, std::chrono::milliseconds timeout) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[65536];
    for (ssize_t n;
         std::chrono::steady_clock::now() < deadline && (n = read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return std::chrono::steady_clock::now() < deadline ? out : "";
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
  EXPECT_NE(lines[0].find(
                "id=id\\nkerneld: request id=FAKE op=scale code=OK\\r\\t\\x1b[31m\\x7f op=scale"),
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

}  // namespace
}  // namespace kerneld::testing
