// libkerneld_native (client/native/native_call.h), the Python client's call
// path, against the real daemon: unary calls and per-thread streams, their
// errors, deadlines, cancellation and freeing at every point of a call. In
// C++ so that the ASan build checks the library's memory handling too (the
// Python suite exercises it only in the plain build).
#include "native/native_call.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

constexpr char kExecute[] = "/kerneld.v1.KernelService/Execute";
constexpr char kExecuteStream[] = "/kerneld.v1.KernelService/ExecuteStream";

// One daemon for the whole binary, stopped (and checked to exit 0) after
// the last test: a daemon left running would hold the test's output open.
Daemon* g_daemon = nullptr;

Daemon& D() {
  if (g_daemon == nullptr) g_daemon = new Daemon({"--enable_test_ops"});
  return *g_daemon;
}

class StopDaemon : public ::testing::Environment {
 public:
  void TearDown() override {
    delete g_daemon;
    g_daemon = nullptr;
  }
};
const auto* const kStop = ::testing::AddGlobalTestEnvironment(new StopDaemon);

kd_channel* Channel(const std::string& target) {
  char err[256] = {0};
  kd_channel* ch = kd_channel_new(target.c_str(), 0, nullptr, 0, nullptr, 0, nullptr, 0, "",
                                  nullptr, nullptr, 0, err, sizeof err);
  EXPECT_NE(ch, nullptr) << err;
  return ch;
}

std::string ScaleRequest(float factor, int n = 5) {
  v1::ExecuteRequest req;
  req.set_op("scale");
  req.set_backend("cpu");
  (*req.mutable_attrs())["factor"].set_f(factor);
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(n);
  std::string data;
  for (int i = 0; i < n; ++i) {
    float v = static_cast<float>(i);
    data.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  x.set_inline_data(data);
  return req.SerializeAsString();
}

std::string SleepRequest(double ms) {
  v1::ExecuteRequest req;
  req.set_op("_test_sleep");
  req.set_backend("cpu");
  (*req.mutable_attrs())["ms"].set_f(ms);
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(1);
  x.set_inline_data(std::string(4, '\0'));
  return req.SerializeAsString();
}

// The first output's floats of a serialized ExecuteResponse.
std::vector<float> Floats(const void* data, size_t n, int* status_code = nullptr) {
  v1::ExecuteResponse resp;
  EXPECT_TRUE(resp.ParseFromArray(data, static_cast<int>(n)));
  if (status_code != nullptr) *status_code = resp.status().code();
  std::vector<float> out;
  for (const auto& [name, t] : resp.outputs()) {
    const std::string& b = t.inline_data();
    out.resize(b.size() / sizeof(float));
    std::memcpy(out.data(), b.data(), out.size() * sizeof(float));
  }
  return out;
}

int Wait(kd_call* c) {
  int code = kd_call_wait(c, 10.0);
  return code;
}

TEST(NativeCall, AbiVersion) { EXPECT_EQ(kd_abi_version(), KD_NATIVE_ABI); }

TEST(NativeCall, UnaryCallSucceedsAndReturnsTheResponse) {
  kd_channel* ch = Channel(D().target());
  const std::string req = ScaleRequest(2.0f);
  for (int i = 0; i < 3; ++i) {
    kd_call* c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 10.0);
    ASSERT_EQ(i % 2 == 0 ? Wait(c) : kd_call_spin(c, 10.0), 0) << kd_call_message(c);
    size_t n = 0;
    const void* data = kd_call_data(c, &n);
    EXPECT_EQ(Floats(data, n), (std::vector<float>{0, 2, 4, 6, 8}));
    EXPECT_STREQ(kd_call_message(c), "");
    kd_call_free(c);
  }
  kd_channel_free(ch);
}

TEST(NativeCall, UnaryErrorCarriesTheDaemonsStatusAndMessage) {
  kd_channel* ch = Channel(D().target());
  v1::ExecuteRequest bad;
  bad.set_op("no_such_op");
  const std::string req = bad.SerializeAsString();
  kd_call* c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 10.0);
  EXPECT_EQ(Wait(c), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_NE(std::string(kd_call_message(c)).find("no_such_op"), std::string::npos)
      << kd_call_message(c);
  size_t n = 7;
  EXPECT_EQ(kd_call_data(c, &n), nullptr);
  EXPECT_EQ(n, 0u);
  kd_call_free(c);
  kd_channel_free(ch);
}

TEST(NativeCall, DeadlineCancelAndFreeWhileRunning) {
  kd_channel* ch = Channel(D().target());
  const std::string req = SleepRequest(2000);
  // A deadline.
  kd_call* c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 0.1);
  EXPECT_EQ(Wait(c), static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED));
  kd_call_free(c);
  // A cancel.
  c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 0);
  EXPECT_EQ(kd_call_wait(c, 0.05), -1);  // still running
  kd_call_cancel(c);
  EXPECT_EQ(Wait(c), static_cast<int>(grpc::StatusCode::CANCELLED));
  kd_call_free(c);
  // Freed while running: cancelled and waited for inside free.
  c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 0);
  EXPECT_EQ(kd_call_spin(c, 0.01), -1);
  auto t0 = std::chrono::steady_clock::now();
  kd_call_free(c);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  kd_channel_free(ch);
}

TEST(NativeCall, NoDaemonIsUnavailable) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  const std::string target = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  close(fd);  // nobody listens there now
  kd_channel* ch = Channel(target);
  const std::string req = ScaleRequest(1.0f);
  kd_call* c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 5.0);
  EXPECT_EQ(Wait(c), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  kd_call_free(c);
  kd_stream* s = kd_stream_open(ch, kExecuteStream, nullptr);
  ASSERT_EQ(kd_stream_send(s, req.data(), req.size()), 0);
  int sent = 1;
  EXPECT_EQ(kd_stream_wait(s, 0, 5.0, &sent), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_EQ(sent, 0);  // it never went out: the client may send it again
  EXPECT_NE(std::string(kd_stream_message(s)), "");
  kd_stream_free(s);
  kd_channel_free(ch);
}

TEST(NativeStream, ExchangesOneAtATimeThenEndsCleanly) {
  kd_channel* ch = Channel(D().target());
  kd_stream* s = kd_stream_open(ch, kExecuteStream, nullptr);
  for (int i = 1; i <= 5; ++i) {
    const std::string req = ScaleRequest(static_cast<float>(i));
    ASSERT_EQ(kd_stream_send(s, req.data(), req.size()), 0);
    // One request at a time: a second send before the wait is refused.
    EXPECT_EQ(kd_stream_send(s, req.data(), req.size()),
              static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
    int sent = 0;
    ASSERT_EQ(kd_stream_wait(s, i % 2 ? 0.001 : 0, 10.0, &sent), 0) << kd_stream_message(s);
    EXPECT_EQ(sent, 1);
    size_t n = 0;
    const void* data = kd_stream_data(s, &n);
    const float f = static_cast<float>(i);
    EXPECT_EQ(Floats(data, n), (std::vector<float>{0, f, 2 * f, 3 * f, 4 * f}));
  }
  kd_stream_free(s);  // idle: WritesDone, then the daemon's status
  kd_channel_free(ch);
}

TEST(NativeStream, ARequestsErrorComesInItsResponse) {
  kd_channel* ch = Channel(D().target());
  kd_stream* s = kd_stream_open(ch, kExecuteStream, nullptr);
  v1::ExecuteRequest bad;
  bad.set_op("no_such_op");
  const std::string req = bad.SerializeAsString();
  ASSERT_EQ(kd_stream_send(s, req.data(), req.size()), 0);
  int sent = 0;
  ASSERT_EQ(kd_stream_wait(s, 0, 10.0, &sent), 0);  // the stream goes on
  size_t n = 0;
  const void* data = kd_stream_data(s, &n);
  int code = 0;
  Floats(data, n, &code);
  EXPECT_EQ(code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  const std::string ok = ScaleRequest(3.0f);
  ASSERT_EQ(kd_stream_send(s, ok.data(), ok.size()), 0);
  ASSERT_EQ(kd_stream_wait(s, 0, 10.0, &sent), 0);
  data = kd_stream_data(s, &n);
  EXPECT_EQ(Floats(data, n), (std::vector<float>{0, 3, 6, 9, 12}));
  kd_stream_free(s);
  kd_channel_free(ch);
}

TEST(NativeStream, CancelAndFreeMidExchange) {
  kd_channel* ch = Channel(D().target());
  const std::string req = SleepRequest(2000);
  // Cancelled while its request runs: the exchange ends with CANCELLED.
  kd_stream* s = kd_stream_open(ch, kExecuteStream, nullptr);
  ASSERT_EQ(kd_stream_send(s, req.data(), req.size()), 0);
  int sent = 0;
  EXPECT_EQ(kd_stream_wait(s, 0.001, 0.1, &sent), -1);
  kd_stream_cancel(s);
  EXPECT_EQ(kd_stream_wait(s, 0, 10.0, &sent), static_cast<int>(grpc::StatusCode::CANCELLED));
  EXPECT_EQ(sent, 1);
  // An ended stream refuses more with its status.
  EXPECT_EQ(kd_stream_send(s, req.data(), req.size()),
            static_cast<int>(grpc::StatusCode::CANCELLED));
  kd_stream_free(s);
  // Freed mid-exchange without a wait, and freed before its first send.
  s = kd_stream_open(ch, kExecuteStream, nullptr);
  ASSERT_EQ(kd_stream_send(s, req.data(), req.size()), 0);
  auto t0 = std::chrono::steady_clock::now();
  kd_stream_free(s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  kd_stream_free(kd_stream_open(ch, kExecuteStream, nullptr));
  kd_channel_free(ch);
}

TEST(NativeStream, ThreadsEachWithTheirOwnStreamAndCalls) {
  kd_channel* ch = Channel(D().target());
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      kd_stream* s = kd_stream_open(ch, kExecuteStream, nullptr);
      for (int i = 0; i < 20; ++i) {
        const std::string req = ScaleRequest(static_cast<float>(t + 1));
        int sent = 0;
        if (kd_stream_send(s, req.data(), req.size()) == 0 &&
            kd_stream_wait(s, 0.0001, 10.0, &sent) == 0) {
          size_t n = 0;
          const void* data = kd_stream_data(s, &n);
          if (Floats(data, n)[1] == static_cast<float>(t + 1)) ++ok;
        }
        kd_call* c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 10.0);
        if (kd_call_wait(c, 10.0) == 0) ++ok;
        kd_call_free(c);
      }
      kd_stream_free(s);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 4 * 20 * 2);
  kd_channel_free(ch);
}

TEST(NativeCall, BadChannelArgumentsSayWhy) {
  char err[128] = {0};
  EXPECT_EQ(kd_channel_new("", 0, nullptr, 0, nullptr, 0, nullptr, 0, "", nullptr, nullptr, 0, err,
                           sizeof err),
            nullptr);
  EXPECT_STREQ(err, "no target");
  EXPECT_EQ(kd_channel_new("127.0.0.1:1", 1, nullptr, 0, "cert", 4, nullptr, 0, "", nullptr,
                           nullptr, 0, err, sizeof err),
            nullptr);
  EXPECT_NE(std::string(err).find("go together"), std::string::npos) << err;
  const char* keys[] = {"grpc.primary_user_agent", "grpc.max_receive_message_length"};
  const char* values[] = {"native-test", "1048576"};
  kd_channel* ch = kd_channel_new(D().target().c_str(), 0, nullptr, 0, nullptr, 0, nullptr, 0, "",
                                  keys, values, 2, err, sizeof err);
  ASSERT_NE(ch, nullptr) << err;
  const std::string req = ScaleRequest(1.0f);
  kd_call* c = kd_call_start(ch, kExecute, req.data(), req.size(), nullptr, 10.0);
  EXPECT_EQ(Wait(c), 0) << kd_call_message(c);
  kd_call_free(c);
  kd_channel_free(ch);
}

}  // namespace
}  // namespace kerneld::testing
