// ExecuteStream's limits, against the real daemon: a client that sends
// without reading is held back by flow control (the daemon's memory stays
// bounded and it keeps serving others), and a malformed message ends the
// stream with INVALID_ARGUMENT after the responses already due.
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// The daemon's resident set, from /proc/<pid>/status (kB -> bytes).
int64_t RssBytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

TEST(StreamLimits, UnreadResponsesStallTheClientAndBoundMemory) {
  Daemon d({"--stream_buffer_mb=16"});  // --stream_window stays 64
  ASSERT_TRUE(d.ok()) << d.Log();
  // 1 MiB in, 1 MiB out per request.
  v1::ExecuteRequest req = ScaleRequest(DType::kFloat32, {256 * 1024}, 2.0);
  {
    v1::ExecuteResponse warm;
    ASSERT_TRUE(d.client().Execute(req, &warm).ok());
  }
  const int64_t rss0 = RssBytes(d.pid());
  ASSERT_GT(rss0, 0);

  constexpr int kRequests = 400;
  grpc::ClientContext ctx;
  auto stream = d.client().stub()->ExecuteStream(&ctx);
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      req.set_request_id(std::to_string(i));
      if (!stream->Write(req)) return;
      ++written;
    }
  });
  // Writes must stop completing once the daemon holds its bound: wait until
  // no write completes for 2 s (or all did: the old behaviour).
  int last = -1;
  auto quiet_since = std::chrono::steady_clock::now();
  const auto give_up = quiet_since + std::chrono::seconds(120);
  while (written.load() < kRequests && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (written.load() != last) {
      last = written.load();
      quiet_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - quiet_since > std::chrono::seconds(2)) {
      break;
    }
  }
  const int64_t grown = RssBytes(d.pid()) - rss0;
  std::printf("writes completed: %d of %d; daemon RSS grew %.1f MiB\n", written.load(), kRequests,
              static_cast<double>(grown) / (1 << 20));
  EXPECT_LT(written.load(), kRequests)
      << "the daemon kept reading a stream whose responses nobody reads";
  // 16 MiB of stream buffer plus gRPC's own transport buffers (stream and
  // connection flow-control windows, one message being parsed).
  EXPECT_LT(grown, int64_t{128} << 20);

  // Other calls are still served while that stream is stalled.
  v1::ExecuteResponse other;
  grpc::Status st = d.client().Execute(ScaleRequest(DType::kFloat32, {16}, 3.0), &other,
                                       std::chrono::milliseconds(10000));
  EXPECT_TRUE(st.ok()) << st.error_message();

  // The client goes away: the writer unblocks, the daemon drops the stream.
  ctx.TryCancel();
  writer.join();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(d.Terminate(std::chrono::seconds(20)), 0) << d.Log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5))
      << "a stream was left behind";
}

// A raw ExecuteStream client: writes the given messages (bytes as they are),
// half-closes, and collects every response and the final status.
class RawStream : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawStream(grpc::GenericStub* stub, const std::vector<std::string>& messages) {
    for (const auto& m : messages) {
      grpc::Slice s(m);
      out_.emplace_back(&s, 1);
    }
    stub->PrepareBidiStreamingCall(&ctx_, "/kerneld.v1.KernelService/ExecuteStream",
                                   grpc::StubOptions(), this);
    StartRead(&in_);
    WriteNext();
    StartCall();
  }

  grpc::Status Await(std::vector<v1::ExecuteResponse>* responses) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    *responses = responses_;
    return status_;
  }

 private:
  void WriteNext() {
    if (next_ < out_.size())
      StartWrite(&out_[next_++]);
    else
      StartWritesDone();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    v1::ExecuteResponse r;
    EXPECT_TRUE(grpc::SerializationTraits<v1::ExecuteResponse>::Deserialize(&in_, &r).ok());
    {
      std::lock_guard<std::mutex> lock(mu_);
      responses_.push_back(r);
    }
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_all();
  }

  grpc::ClientContext ctx_;
  std::vector<grpc::ByteBuffer> out_;
  size_t next_ = 0;
  grpc::ByteBuffer in_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1::ExecuteResponse> responses_;
  grpc::Status status_;
  bool done_ = false;
};

// Both APIs: the callback stream (default) and --grpc_api=sync's.
class MalformedMessage : public ::testing::TestWithParam<std::string> {};

TEST_P(MalformedMessage, EndsTheStreamWithInvalidArgument) {
  Daemon d(GetParam().empty() ? std::vector<std::string>{} : std::vector<std::string>{GetParam()});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto valid = [](const std::string& id) {
    v1::ExecuteRequest r = ScaleRequest(DType::kFloat32, {64}, 2.0);
    r.set_request_id(id);
    return r.SerializeAsString();
  };
  // Field 1 (op), length 127, but only 2 bytes follow: cannot parse.
  const std::string garbage("\x0a\x7f\x01\x02", 4);
  grpc::GenericStub stub(d.client().channel());
  for (int round = 0; round < 5; ++round) {
    RawStream s(&stub, {valid("a"), valid("b"), garbage, valid("d")});
    std::vector<v1::ExecuteResponse> responses;
    grpc::Status st = s.Await(&responses);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(
                  "ExecuteStream message 3 is not a valid kerneld.v1.ExecuteRequest (4 bytes)"),
              std::string::npos)
        << st.error_message();
    ASSERT_EQ(responses.size(), 2u);
    std::vector<std::string> ids = {responses[0].request_id(), responses[1].request_id()};
    std::sort(ids.begin(), ids.end());  // completion order
    EXPECT_EQ(ids, (std::vector<std::string>{"a", "b"}));
    for (const auto& r : responses) EXPECT_EQ(r.status().code(), 0) << r.status().message();
  }
  // The daemon is unharmed.
  EXPECT_TRUE(d.Serving());
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

INSTANTIATE_TEST_SUITE_P(StreamLimits, MalformedMessage,
                         ::testing::Values(std::string(), std::string("--grpc_api=sync")));

}  // namespace
}  // namespace kerneld::testing
