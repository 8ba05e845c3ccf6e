// The RPC lifecycle against hostile clients, on both gRPC APIs (callback and
// sync): every RPC cancelled or deadlined at every stage (before decode,
// queued, running, while the response is written), streams half-closed or
// abandoned, clients SIGKILLed mid-request, and a drain during all of it.
// The daemon must stay up, answer only with the contract's codes, and leak
// no memory, file descriptors or in-flight counts.
//
// Stages are reached by stimulus, not by synchronization: each event cancels
// after a random delay drawn across the span of the stage it aims at (a
// request's decode, its time in the single worker's queue behind a
// `_test_sleep`, its run, the write of a 1 MiB response), so 10,000 events
// cover every stage many times over. KERNELD_LIFECYCLE_EVENTS changes the
// count.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <random>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

using Clock = std::chrono::steady_clock;

int EventCount() {
  const char* e = std::getenv("KERNELD_LIFECYCLE_EVENTS");
  return e ? std::max(1, std::atoi(e)) : 10000;
}

bool Sanitized() {
  return std::getenv("ASAN_OPTIONS") != nullptr || std::getenv("TSAN_OPTIONS") != nullptr;
}

// Busy-waits `us` microseconds: the delay between a call's start and its
// cancellation is the stimulus that picks the stage it lands in.
void Spin(int64_t us) {
  const auto until = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < until) {
  }
}

int64_t RssBytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

int OpenFds(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

v1::ExecuteRequest SleepRequest(double ms) {
  auto req = ScaleRequest(DType::kFloat32, {16}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  req.set_backend("cpu");
  return req;
}

// Codes a call may end with here: its own cancellation or deadline, a full
// queue, or (during drain) UNAVAILABLE. Anything else is a daemon bug.
bool Allowed(grpc::StatusCode c, bool draining) {
  switch (c) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return true;
    case grpc::StatusCode::UNAVAILABLE:
      return draining;
    default:
      return false;
  }
}

// One client of many: a channel of its own and a random walk over the
// events.
class Hostile {
 public:
  Hostile(const std::string& target, uint64_t seed, const std::string& shm_name)
      : channel_(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())),
        stub_(v1::KernelService::NewStub(channel_)),
        buffers_(v1::BufferService::NewStub(channel_)),
        rng_(seed),
        shm_name_(shm_name),
        small_(ScaleRequest(DType::kFloat16, {64}, 2.0)),
        big_(ScaleRequest(DType::kFloat32, {256 * 1024}, 2.0)),  // 1 MiB each way
        sleep_(SleepRequest(1.0)) {}

  void Run(int events, bool draining) {
    for (int i = 0; i < events; ++i) Event(draining);
  }
  const std::map<int, int>& codes() const { return codes_; }
  int done() const { return done_.load(); }
  const std::vector<std::string>& bad() const { return bad_; }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  const v1::ExecuteRequest& Pick() {
    const int64_t r = Uniform(0, 9);
    return r < 5 ? small_ : r < 8 ? sleep_ : big_;
  }
  void Note(const char* what, const grpc::Status& st, bool draining) {
    ++codes_[st.error_code()];
    done_.fetch_add(1);
    if (!Allowed(st.error_code(), draining) && bad_.size() < 20)
      bad_.push_back(std::string(what) + ": " + std::to_string(st.error_code()) + " " +
                     st.error_message());
  }

  void Event(bool draining) {
    switch (Uniform(0, 6)) {
      case 0:
      case 1:
        return UnaryCancelled(draining);
      case 2:
        return UnaryDeadline(draining);
      case 3:
        return StreamCancelled(draining);
      case 4:
        return StreamHalfClosed(draining);
      case 5:
        return StreamAbandoned(draining);
      default:
        return BufferCallCancelled(draining);
    }
  }

  // Unary Execute, cancelled 0-3 ms after it starts.
  void UnaryCancelled(bool draining) {
    grpc::ClientContext ctx;
    v1::ExecuteResponse resp;
    std::promise<grpc::Status> done;
    stub_->async()->Execute(&ctx, &Pick(), &resp, [&](grpc::Status st) { done.set_value(st); });
    Spin(Uniform(0, 3000));
    ctx.TryCancel();
    Note("Execute cancelled", done.get_future().get(), draining);
  }

  // Unary Execute whose deadline passes 0-3 ms after it starts.
  void UnaryDeadline(bool draining) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::microseconds(Uniform(0, 3000)));
    v1::ExecuteResponse resp;
    Note("Execute deadline", stub_->Execute(&ctx, Pick(), &resp), draining);
  }

  // ExecuteStream: 1-4 requests written, cancelled 0-3 ms later, with or
  // without reading what came back.
  void StreamCancelled(bool draining) {
    grpc::ClientContext ctx;
    auto stream = stub_->ExecuteStream(&ctx);
    const int64_t n = Uniform(1, 4);
    for (int64_t i = 0; i < n; ++i)
      if (!stream->Write(Pick())) break;
    Spin(Uniform(0, 3000));
    if (Uniform(0, 1) == 0) {
      v1::ExecuteResponse resp;
      stream->Read(&resp);
    }
    ctx.TryCancel();
    Note("ExecuteStream cancelled", stream->Finish(), draining);
  }

  // ExecuteStream half-closed: either every answer is read (the stream must
  // end OK, each answer OK), or the client cancels after the half-close.
  void StreamHalfClosed(bool draining) {
    grpc::ClientContext ctx;
    auto stream = stub_->ExecuteStream(&ctx);
    const int64_t n = Uniform(1, 4);
    int64_t written = 0;
    for (; written < n; ++written)
      if (!stream->Write(Pick())) break;
    stream->WritesDone();
    if (Uniform(0, 2) == 0) {
      Spin(Uniform(0, 3000));
      ctx.TryCancel();
      Note("ExecuteStream half-closed, cancelled", stream->Finish(), draining);
      return;
    }
    v1::ExecuteResponse resp;
    int64_t read = 0;
    while (stream->Read(&resp)) {
      ++read;
      const auto code = static_cast<grpc::StatusCode>(resp.status().code());
      if (!Allowed(code, draining) && bad_.size() < 20)
        bad_.push_back("ExecuteStream answer: " + std::to_string(code) + " " +
                       resp.status().message());
    }
    const grpc::Status st = stream->Finish();
    Note("ExecuteStream half-closed", st, draining);
    if (st.ok() && read != written && bad_.size() < 20)
      bad_.push_back("ExecuteStream half-closed: " + std::to_string(written) + " written, " +
                     std::to_string(read) + " answered");
  }

  // ExecuteStream left without a half-close or a cancel: the context's
  // destruction (the client going away) is all the daemon sees.
  void StreamAbandoned(bool draining) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    auto stream = stub_->ExecuteStream(ctx.get());
    stream->Write(Pick());
    Spin(Uniform(0, 2000));
    ctx->TryCancel();  // what destroying a client's call does
    Note("ExecuteStream abandoned", stream->Finish(), draining);
  }

  // RegisterSharedMemory or ListBuffers cancelled 0-1 ms in; whatever got
  // registered is found by name and unregistered, as a client that lost
  // the answer would.
  void BufferCallCancelled(bool draining) {
    grpc::ClientContext ctx;
    std::promise<grpc::Status> done;
    v1::RegisterSharedMemoryRequest req;
    v1::RegisterSharedMemoryResponse resp;
    req.set_shm_name(shm_name_);
    req.set_name("lifecycle");
    req.set_byte_size(4096);
    buffers_->async()->RegisterSharedMemory(&ctx, &req, &resp,
                                            [&](grpc::Status st) { done.set_value(st); });
    Spin(Uniform(0, 1000));
    ctx.TryCancel();
    grpc::Status st = done.get_future().get();
    Note("RegisterSharedMemory cancelled", st, draining);
    if (draining) return;
    grpc::ClientContext lctx;
    v1::ListBuffersRequest lreq;
    v1::ListBuffersResponse lresp;
    if (!buffers_->ListBuffers(&lctx, lreq, &lresp).ok()) return;
    for (const auto& b : lresp.buffers()) {
      grpc::ClientContext uctx;
      v1::UnregisterBufferRequest ureq;
      v1::UnregisterBufferResponse uresp;
      ureq.set_buffer_id(b.buffer_id());
      buffers_->UnregisterBuffer(&uctx, ureq, &uresp);
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KernelService::Stub> stub_;
  std::unique_ptr<v1::BufferService::Stub> buffers_;
  std::mt19937_64 rng_;
  std::string shm_name_;
  v1::ExecuteRequest small_, big_, sleep_;
  std::map<int, int> codes_;
  std::atomic<int> done_{0};
  std::vector<std::string> bad_;
};

// A shared-memory object the hostile clients register over and over.
class ShmObject {
 public:
  explicit ShmObject(const std::string& name) : name_(name) {
    const int fd = shm_open(name_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd >= 0) {
      ok_ = ftruncate(fd, 4096) == 0;
      close(fd);
    }
  }
  ~ShmObject() { shm_unlink(name_.c_str()); }
  bool ok() const { return ok_; }

 private:
  std::string name_;
  bool ok_ = false;
};

// Polls `pred` (a condition of the daemon, not a sleep) for up to `limit`.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

class RpcLifecycle : public ::testing::TestWithParam<std::string> {};

// The repro, first: a stream whose request is read in full just as
// the client cancels. The callback API finished the call with the read
// outstanding, then started the request on a context gRPC had freed: the
// worker's cancellation check crashed in absl::Mutex.
TEST_P(RpcLifecycle, CancelledStreamWithARequestInFlightKeepsTheDaemonUp) {
  Daemon d({"--grpc_api=" + GetParam()});
  ASSERT_TRUE(d.ok()) << d.Log();
  // 4 MiB in: its read spans the cancellation's arrival.
  const v1::ExecuteRequest req = ScaleRequest(DType::kFloat32, {1024 * 1024}, 2.0);
  auto channel = grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::KernelService::NewStub(channel);
  std::mt19937_64 rng(7);
  const int rounds = std::max(50, EventCount() / 10);
  for (int i = 0; i < rounds; ++i) {
    grpc::ClientContext ctx;
    auto stream = stub->ExecuteStream(&ctx);
    stream->Write(req);
    Spin(std::uniform_int_distribution<int64_t>(0, 5000)(rng));
    ctx.TryCancel();
    const grpc::Status st = stream->Finish();
    ASSERT_TRUE(st.ok() || st.error_code() == grpc::StatusCode::CANCELLED)
        << "round " << i << ": " << st.error_code() << " " << st.error_message() << "\n"
        << d.Log();
  }
  ASSERT_TRUE(d.Serving()) << "the daemon died\n" << d.Log();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST_P(RpcLifecycle, EveryCallCancelledAtEveryStageLeaksNothing) {
  // One CPU worker with a short queue: `_test_sleep` requests make others
  // wait (the queued stage) and sometimes find it full.
  Daemon d(
      {"--grpc_api=" + GetParam(), "--cpu_workers=1", "--enable_test_ops", "--queue_capacity=32"});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string shm_name = "/kerneld-lifecycle-" + std::to_string(getpid());
  ShmObject shm(shm_name);
  ASSERT_TRUE(shm.ok());

  // Warm every path once, then take the baseline.
  Hostile(d.unix_target(), 1, shm_name).Run(50, false);
  ASSERT_TRUE(Eventually([&] {
    const std::string m = d.Metrics();
    return SeriesValue(m, "kerneld_inflight_requests", {}) == 0.0 &&
           SeriesValue(m, "kerneld_queue_depth", {}) == 0.0;
  }));
  const int fds0 = OpenFds(d.pid());
  const int64_t rss0 = RssBytes(d.pid());

  constexpr int kClients = 8;
  const int per_client = (EventCount() + kClients - 1) / kClients;
  std::vector<std::unique_ptr<Hostile>> clients;
  for (int c = 0; c < kClients; ++c)
    clients.push_back(std::make_unique<Hostile>(d.unix_target(), 100 + c, shm_name));
  {
    std::vector<std::thread> threads;
    for (auto& c : clients) threads.emplace_back([&c, per_client] { c->Run(per_client, false); });
    for (auto& t : threads) t.join();
  }
  std::map<int, int> codes;
  for (auto& c : clients) {
    for (const auto& [code, n] : c->codes()) codes[code] += n;
    for (const auto& b : c->bad()) ADD_FAILURE() << b;
  }
  std::string summary;
  for (const auto& [code, n] : codes)
    summary += " " + std::to_string(code) + ":" + std::to_string(n);
  std::cout << "[ lifecycle ] " << GetParam() << " " << per_client * kClients
            << " events; status codes (code:count):" << summary << "\n";
  EXPECT_GT(codes[static_cast<int>(grpc::StatusCode::CANCELLED)], 0) << summary;
  EXPECT_GT(codes[static_cast<int>(grpc::StatusCode::OK)], 0) << summary;
  clients.clear();  // close their channels

  ASSERT_TRUE(d.Serving()) << "the daemon died\n" << d.Log();
  // Nothing left running or queued, no buffer left registered, and the
  // connections' descriptors returned.
  EXPECT_TRUE(Eventually([&] {
    const std::string m = d.Metrics();
    return SeriesValue(m, "kerneld_inflight_requests", {}) == 0.0 &&
           SeriesValue(m, "kerneld_queue_depth", {}) == 0.0;
  })) << d.Metrics();
  EXPECT_TRUE(Eventually([&] { return OpenFds(d.pid()) <= fds0 + 2; }))
      << "fds: " << fds0 << " before, " << OpenFds(d.pid()) << " after";
  {
    grpc::ClientContext ctx;
    v1::ListBuffersResponse resp;
    auto stub = v1::BufferService::NewStub(
        grpc::CreateChannel(d.unix_target(), grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(stub->ListBuffers(&ctx, v1::ListBuffersRequest(), &resp).ok());
    EXPECT_EQ(resp.buffers_size(), 0);
  }
  const int64_t grown = RssBytes(d.pid()) - rss0;
  EXPECT_LT(grown, (Sanitized() ? 1024LL : 256LL) << 20)
      << "resident memory grew by " << grown << " bytes";

  // Drain in the middle of it all: every call still ends with a contract
  // code, and the daemon exits 0 once its last request is done.
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Hostile>> drainers;
  for (int c = 0; c < 4; ++c)
    drainers.push_back(std::make_unique<Hostile>(d.unix_target(), 900 + c, shm_name));
  std::vector<std::thread> threads;
  for (auto& c : drainers)
    threads.emplace_back([&c, &stop] {
      while (!stop.load()) c->Run(1, true);
    });
  // Under load before the signal: the drainers' first answers are in.
  Eventually([&] {
    int n = 0;
    for (auto& c : drainers) n += c->done();
    return n >= 20;
  });
  const int rc = d.Terminate(std::chrono::seconds(60));
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(rc, 0) << d.Log();
  for (auto& c : drainers)
    for (const auto& b : c->bad()) ADD_FAILURE() << "during drain: " << b;
}

// A client process SIGKILLed mid-request, 100 times: its streams and unary
// calls vanish with the connection. The child is this test binary re-run
// (exec, not fork: gRPC's threads do not survive a fork).
TEST_P(RpcLifecycle, ClientsKilledMidRequestLeakNothing) {
  Daemon d({"--grpc_api=" + GetParam(), "--cpu_workers=1", "--enable_test_ops"});
  ASSERT_TRUE(d.ok()) << d.Log();
  {
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(ScaleRequest(DType::kFloat32, {16}, 2.0), &resp).ok());
  }
  const int fds0 = OpenFds(d.pid());
  std::mt19937_64 rng(11);
  const int kills = Sanitized() ? 40 : 100;
  for (int i = 0; i < kills; ++i) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    if (child == 0) {
      dup2(ready[1], 3);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      setenv("KERNELD_LIFECYCLE_CHILD_TARGET", d.target().c_str(), 1);
      execl("/proc/self/exe", "rpc_lifecycle_child", "--gtest_filter=RpcLifecycleChild.*",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(ready[1]);
    char byte = 0;
    // The child writes a byte once its first answers are in: it is mid-load.
    ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the client child did not start";
    close(ready[0]);
    Spin(std::uniform_int_distribution<int64_t>(0, 3000)(rng));
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  ASSERT_TRUE(d.Serving()) << "the daemon died\n" << d.Log();
  EXPECT_TRUE(Eventually([&] {
    const std::string m = d.Metrics();
    return SeriesValue(m, "kerneld_inflight_requests", {}) == 0.0 &&
           SeriesValue(m, "kerneld_queue_depth", {}) == 0.0;
  })) << d.Metrics();
  EXPECT_TRUE(Eventually([&] { return OpenFds(d.pid()) <= fds0 + 2; }))
      << "fds: " << fds0 << " before, " << OpenFds(d.pid()) << " after";
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

INSTANTIATE_TEST_SUITE_P(Apis, RpcLifecycle, ::testing::Values("callback", "sync"));

// The body of a killed client (run only as ClientsKilledMidRequest's child):
// streams and unary calls in four threads until SIGKILL.
TEST(RpcLifecycleChild, DISABLED_LoadUntilKilled) {
  const char* target = std::getenv("KERNELD_LIFECYCLE_CHILD_TARGET");
  if (target == nullptr) GTEST_SKIP() << "run by ClientsKilledMidRequestLeakNothing";
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
      auto stub = v1::KernelService::NewStub(channel);
      const v1::ExecuteRequest big = ScaleRequest(DType::kFloat32, {256 * 1024}, 2.0);
      const v1::ExecuteRequest sleep = SleepRequest(1.0);
      for (;;) {
        if (t % 2 == 0) {
          grpc::ClientContext ctx;
          auto stream = stub->ExecuteStream(&ctx);
          for (int i = 0; i < 4; ++i) stream->Write(i % 2 ? big : sleep);
          v1::ExecuteResponse resp;
          stream->Read(&resp);
          if (answered.fetch_add(1) == 0) (void)!write(3, "r", 1);
          stream->WritesDone();
          while (stream->Read(&resp)) {
          }
          stream->Finish();
        } else {
          grpc::ClientContext ctx;
          v1::ExecuteResponse resp;
          stub->Execute(&ctx, t == 1 ? big : sleep, &resp);
          if (answered.fetch_add(1) == 0) (void)!write(3, "r", 1);
        }
      }
    });
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace kerneld::testing
