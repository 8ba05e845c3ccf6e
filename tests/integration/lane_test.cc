// The same-host lane (docs/lane.md) end to end: the real daemon with
// --lane_socket, the real LaneClient, the CPU backend. Answers equal gRPC's
// bit for bit; principals and isolation hold; garbage, a sealed ring a
// client tries to cut, and SIGKILLed clients leave the daemon serving and
// leak nothing; drain answers what is in flight.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "buffers.h"
#include "daemon_fixture.h"
#include "kerneld_lane/futex.h"
#include "kerneld_lane/protocol.h"
#include "lane_client.h"

namespace kerneld::testing {
namespace {

using client::LaneClient;
using Clock = std::chrono::steady_clock;

// A daemon serving the lane on a socket in a directory of the test's own.
struct LaneDaemon {
  explicit LaneDaemon(std::vector<std::string> flags = {}) {
    char tmpl[] = "/tmp/kerneld-lane-XXXXXX";
    dir = mkdtemp(tmpl);
    path = dir + "/lane.sock";
    flags.push_back("--lane_socket=" + path);
    d = std::make_unique<Daemon>(flags);
  }
  ~LaneDaemon() {
    d.reset();
    std::filesystem::remove_all(dir);
  }
  std::unique_ptr<LaneClient> Connect(const std::string& token = "") {
    grpc::Status st;
    auto c = LaneClient::Connect(path, token, &st);
    EXPECT_TRUE(c != nullptr) << st.error_message();
    return c;
  }
  std::string dir, path;
  std::unique_ptr<Daemon> d;
};

bool Eventually(const std::function<bool()>& cond,
                std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

int OpenFds(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// Mappings of lane rings in the daemon's address space.
int RingMappings(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
  int n = 0;
  for (std::string line; std::getline(f, line);)
    if (line.find("kerneld-lane") != std::string::npos) ++n;
  return n;
}

double LanesOpen(const Daemon& d) {
  return SeriesValue(d.Metrics(), "kerneld_lanes_open", {}).value_or(-1);
}

// The outputs' bytes, by name: what "bit for bit" compares.
std::map<std::string, std::string> OutputBytes(const v1::ExecuteResponse& r) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : r.outputs()) out[name] = t.inline_data();
  return out;
}

v1::ExecuteRequest AddRequest(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  v1::ExecuteRequest req;
  req.set_op("add");
  client::ToProto(client::Random(dt, shape, rng), &(*req.mutable_inputs())["a"]);
  client::ToProto(client::Random(dt, shape, rng), &(*req.mutable_inputs())["b"]);
  return req;
}

v1::ExecuteRequest SleepRequest(double ms) {
  auto req = ScaleRequest(DType::kFloat32, {16}, 1.0);
  req.set_op("_test_sleep");
  req.mutable_attrs()->clear();
  (*req.mutable_attrs())["ms"].set_f(ms);
  return req;
}

TEST(LaneTest, InlineAnswersEqualGrpcBitForBit) {
  LaneDaemon ld;
  ASSERT_TRUE(ld.d->ok());
  EXPECT_EQ(ld.d->Ready("lane"), std::vector<std::string>{"unix:" + ld.path});
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  EXPECT_EQ(lane->slots(), 8u);
  int n = 0;
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t len : {1, 17, 4096}) {
      for (const auto& req :
           {ScaleRequest(dt, {len}, 1.7, nullptr, 3 + len), AddRequest(dt, {2, len}, 9 + len)}) {
        v1::ExecuteResponse by_lane, by_grpc;
        ASSERT_TRUE(lane->Execute(req, &by_lane).ok()) << req.op();
        ASSERT_TRUE(ld.d->unix_client().Execute(req, &by_grpc).ok());
        EXPECT_EQ(OutputBytes(by_lane), OutputBytes(by_grpc)) << req.op() << " " << len;
        EXPECT_FALSE(OutputBytes(by_lane).begin()->second.empty());
        EXPECT_EQ(by_lane.info().backend(), "cpu");
        ++n;
      }
    }
  }
  // A request the schema refuses gets the message gRPC gives.
  auto bad = ScaleRequest(DType::kFloat32, {4}, 1.0);
  (*bad.mutable_attrs())["nope"].set_f(1);
  v1::ExecuteResponse r;
  const grpc::Status lst = lane->Execute(bad, &r);
  const grpc::Status gst = ld.d->unix_client().Execute(bad, &r);
  EXPECT_EQ(lst.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(lst.error_message(), gst.error_message());
  // Lane requests are counted as such, and in the request series.
  const std::string m = ld.d->Metrics();
  EXPECT_EQ(SeriesValue(m, "kerneld_lane_requests_total", {"code=\"OK\"", "transport=\"lane\""}),
            n);
  EXPECT_EQ(
      SeriesValue(m, "kerneld_lane_requests_total", {"code=\"INVALID_ARGUMENT\""}).value_or(0), 1);
  EXPECT_EQ(SeriesValue(m, "kerneld_lanes_open", {}), 1);
}

TEST(LaneTest, ShmBuffersMatchGrpc) {
  LaneDaemon ld;
  ASSERT_TRUE(ld.d->ok());
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  // Registered over the unix socket: the same principal (uid) as the lane.
  client::SharedMemoryBuffer shm(ld.d->unix_client(), 1 << 16);
  ASSERT_TRUE(shm.status().ok()) << shm.status().error_message();
  client::HostTensor x;
  auto req = ScaleRequest(DType::kFloat32, {1000}, 3.25, &x, 5);
  const std::string bytes = req.inputs().at("x").inline_data();  // a copy: x is replaced below
  std::memcpy(shm.data(), bytes.data(), bytes.size());
  v1::ExecuteResponse by_grpc;
  ASSERT_TRUE(ld.d->unix_client().Execute(req, &by_grpc).ok());
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {1000}, 0);
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {1000}, 8192);
  v1::ExecuteResponse by_lane;
  const grpc::Status st = lane->Execute(req, &by_lane);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(by_lane.outputs().at("y").has_buffer());
  ASSERT_EQ(bytes.size(), 4000u);
  EXPECT_TRUE(std::string(shm.data() + 8192, bytes.size()) ==
              by_grpc.outputs().at("y").inline_data())
      << "the lane's output in the buffer differs from gRPC's";
  // Out of the buffer's bounds: refused, as on gRPC.
  (*req.mutable_outputs())["y"] = shm.Tensor(DType::kFloat32, {1000}, (1 << 16) - 16);
  EXPECT_EQ(lane->Execute(req, &by_lane).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(LaneTest, PrincipalsKeepBuffersApart) {
  char tmpl[] = "/tmp/kerneld-lane-tok-XXXXXX";
  const std::string tdir = mkdtemp(tmpl);
  const std::string alice = "alice-token-0123456789abcdef";
  std::ofstream(tdir + "/tokens") << alice << " alice user\n";
  chmod((tdir + "/tokens").c_str(), 0600);
  LaneDaemon ld({"--auth_tokens=" + tdir + "/tokens"});
  ASSERT_TRUE(ld.d->ok());
  client::SharedMemoryBuffer shm(ld.d->unix_client(), 4096);  // uid:N's
  ASSERT_TRUE(shm.status().ok()) << shm.status().error_message();
  auto req = ScaleRequest(DType::kFloat32, {16}, 2.0);
  (*req.mutable_inputs())["x"] = shm.Tensor(DType::kFloat32, {16}, 0);
  v1::ExecuteResponse r;
  auto mine = ld.Connect();  // no token: the socket's uid, the buffer's owner
  ASSERT_TRUE(mine);
  EXPECT_TRUE(mine->Execute(req, &r).ok());
  // A token names another principal: the buffer is unknown to it, exactly
  // as an id that was never registered.
  auto as_alice = ld.Connect(alice);
  ASSERT_TRUE(as_alice);
  const grpc::Status other = as_alice->Execute(req, &r);
  auto unknown = req;
  (*unknown.mutable_inputs())["x"].mutable_buffer()->set_buffer_id("no-such-buffer");
  const grpc::Status never = as_alice->Execute(unknown, &r);
  EXPECT_FALSE(other.ok());
  EXPECT_EQ(other.error_code(), never.error_code());
  EXPECT_EQ(other.error_message().find(shm.id()) != std::string::npos,
            never.error_message().find("no-such-buffer") != std::string::npos);
  // A token the daemon does not know: no lane at all.
  grpc::Status st;
  EXPECT_EQ(LaneClient::Connect(ld.path, "wrong-token-0123456789abcdef", &st), nullptr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  // Another uid (as root: a child that becomes nobody) is another principal.
  if (geteuid() == 0) {
    chmod(ld.dir.c_str(), 0755);  // mkdtemp made it 0700
    chmod(ld.path.c_str(), 0777);
    std::string bytes;
    req.SerializeToString(&bytes);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    const pid_t child = fork();
    if (child == 0) {
      char code = 'x';
      if (setgid(65534) == 0 && setuid(65534) == 0) {
        grpc::Status cst;
        auto c = LaneClient::Connect(ld.path, "", &cst);
        std::string out;
        code =
            c == nullptr ? 'c' : static_cast<char>('A' + c->ExecuteBytes(bytes, &out).error_code());
      }
      (void)!write(p[1], &code, 1);
      _exit(0);
    }
    close(p[1]);
    char code = 0;
    ASSERT_EQ(read(p[0], &code, 1), 1);
    close(p[0]);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(code, static_cast<char>('A' + never.error_code()))
        << "the other uid's request ended with code " << (code - 'A');
  }
  std::filesystem::remove_all(tdir);
}

TEST(LaneTest, GarbageInASlotIsAnErrorAndTheDaemonServesOn) {
  LaneDaemon ld;
  ASSERT_TRUE(ld.d->ok());
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  std::mt19937_64 rng(7);
  std::string out;
  for (int i = 0; i < 200; ++i) {
    std::string junk(rng() % 300, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    const grpc::Status st = lane->ExecuteBytes(junk, &out);
    // Some junk parses as a request (of an unknown op, say): an error
    // either way, never an answer or a crash.
    EXPECT_FALSE(st.ok());
  }
  // A header that lies about its length, written straight into the ring.
  auto* s = lane::SlotAt(lane->ring(), lane->slot_bytes(), 0);
  s->request_bytes = ~uint64_t{0};
  s->state.store(lane::kRequest);
  auto* h = static_cast<lane::RingHeader*>(lane->ring());
  h->doorbell.fetch_add(1);
  lane::FutexWakeAll(&h->doorbell);
  ASSERT_TRUE(Eventually([&] { return s->state.load() == lane::kResponse; }));
  EXPECT_EQ(s->status_code, static_cast<int32_t>(grpc::StatusCode::INVALID_ARGUMENT));
  s->state.store(lane::kFree);
  // The daemon (and this lane) still serve.
  v1::ExecuteResponse r;
  EXPECT_TRUE(lane->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
  EXPECT_TRUE(ld.d->Serving());
}

TEST(LaneTest, ASlotMarkedAgainWhileItRunsIsAnsweredOnce) {
  // On the worker, not inline on the lane's thread: that thread is free to
  // look at the slot while the request runs.
  LaneDaemon ld({"--enable_test_ops", "--cpu_workers=1", "--inline_max_kb=-1"});
  ASSERT_TRUE(ld.d->ok());
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  std::string bytes;
  SleepRequest(100).SerializeToString(&bytes);
  auto* s = lane::SlotAt(lane->ring(), lane->slot_bytes(), 7);  // a slot Execute takes last
  auto* h = static_cast<lane::RingHeader*>(lane->ring());
  std::memcpy(lane::SlotPayload(s), bytes.data(), bytes.size());
  s->request_bytes = bytes.size();
  s->state.store(lane::kRequest);
  h->doorbell.fetch_add(1);
  lane::FutexWakeAll(&h->doorbell);
  ASSERT_TRUE(Eventually([&] { return s->state.load() != lane::kRequest; }));
  // A hostile client says "request" again while the daemon runs it.
  uint32_t running = lane::kRunning;
  s->state.compare_exchange_strong(running, lane::kRequest);
  h->doorbell.fetch_add(1);
  lane::FutexWakeAll(&h->doorbell);
  ASSERT_TRUE(Eventually([&] { return s->state.load() == lane::kResponse; }));
  EXPECT_EQ(s->status_code, 0);
  // One worker, first in first out: a second run of the slot would be
  // answered before this request is.
  v1::ExecuteResponse r;
  ASSERT_TRUE(lane->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
  EXPECT_EQ(SeriesValue(ld.d->Metrics(), "kerneld_lane_requests_total", {"code=\"OK\""}), 2);
}

TEST(LaneTest, ARingCannotBeCutUnderTheDaemon) {
  LaneDaemon ld;
  ASSERT_TRUE(ld.d->ok());
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  // The ring is sealed: a client cannot shrink it (the daemon would fault
  // on the pages it lost) nor grow it.
  EXPECT_NE(ftruncate(lane->memfd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(lane->memfd(), 1 << 30), 0);
  // Unmapping its own view takes nothing from the daemon's.
  auto victim = ld.Connect();
  ASSERT_TRUE(victim);
  munmap(victim->ring(), lane::RingBytes(victim->slots(), victim->slot_bytes()));
  v1::ExecuteResponse r;
  EXPECT_TRUE(lane->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
  EXPECT_TRUE(ld.d->Serving());
  // (victim's destructor unmaps again: harmless, the range is gone.)
}

TEST(LaneTest, ManyClientsMixedRequestsNoneLostOrMismatched) {
  LaneDaemon ld({"--enable_test_ops", "--quota_lanes=0"});  // 64 lanes of one uid
  ASSERT_TRUE(ld.d->ok());
  // The answers to expect, from gRPC.
  std::vector<v1::ExecuteRequest> reqs;
  std::vector<std::map<std::string, std::string>> want;
  for (int i = 0; i < 12; ++i) {
    const DType dt = i % 3 == 0 ? DType::kFloat16 : DType::kFloat32;
    reqs.push_back(i % 2 ? ScaleRequest(dt, {1 + i * 37}, 0.5 + i, nullptr, 100 + i)
                         : AddRequest(dt, {3, 5 + i}, 200 + i));
    v1::ExecuteResponse r;
    ASSERT_TRUE(ld.d->unix_client().Execute(reqs.back(), &r).ok());
    want.push_back(OutputBytes(r));
  }
  // Under ThreadSanitizer every call costs ~20x: the same 64 clients on two
  // threads each, with fewer calls, keep the interleavings in 300 s.
  constexpr int kClients = 64, kPerClient = kThreadSanitized ? 200 : 2000;
  std::atomic<int> ok{0}, mismatched{0}, failed{0}, refused_right{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto lane = ld.Connect();
      if (!lane) return;
      // Both threads' seeds are drawn before the second one starts: one
      // engine called from two threads is a data race.
      std::mt19937_64 rng(c);
      const uint64_t seed_a = rng(), seed_b = rng();
      // Every client shares its lane between two threads.
      auto work = [&](uint64_t seed) {
        std::mt19937_64 r2(seed);
        for (int i = 0; i < kPerClient / 2; ++i) {
          const size_t k = r2() % (reqs.size() + 1);
          v1::ExecuteResponse resp;
          if (k == reqs.size()) {  // garbage, now and then
            std::string out;
            if (lane->ExecuteBytes("\xff\xff\xff", &out).error_code() ==
                grpc::StatusCode::INVALID_ARGUMENT)
              refused_right.fetch_add(1);
            else
              failed.fetch_add(1);
            continue;
          }
          const grpc::Status st = lane->Execute(reqs[k], &resp);
          if (!st.ok())
            failed.fetch_add(1);
          else if (OutputBytes(resp) != want[k])
            mismatched.fetch_add(1);
          else
            ok.fetch_add(1);
        }
      };
      std::thread second([&] { work(seed_b); });
      work(seed_a);
      second.join();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(mismatched.load(), 0);
  EXPECT_EQ(ok.load() + refused_right.load(), kClients * kPerClient);
}

TEST(LaneTest, KilledClientsLeaveNoLaneFdOrRingBehind) {
  LaneDaemon ld({"--enable_test_ops"});
  ASSERT_TRUE(ld.d->ok());
  const pid_t daemon = ld.d->pid();
  {  // one lane opened and closed first: the daemon's lazily made state
    auto warm = ld.Connect();
    v1::ExecuteResponse r;
    ASSERT_TRUE(warm->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
  }
  ASSERT_TRUE(Eventually([&] { return LanesOpen(*ld.d) == 0; }));
  const int fds0 = OpenFds(daemon);
  std::string quick, slow;
  ScaleRequest(DType::kFloat32, {64}, 2.0).SerializeToString(&quick);
  SleepRequest(30).SerializeToString(&slow);
  for (int i = 0; i < 24; ++i) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    const pid_t child = fork();
    if (child == 0) {
      close(p[0]);
      grpc::Status st;
      auto c = LaneClient::Connect(ld.path, "", &st);
      if (c == nullptr) _exit(1);
      std::string out;
      c->ExecuteBytes(quick, &out);
      // Mid-request: the slow one is in the ring when the parent kills us.
      auto* s = lane::SlotAt(c->ring(), c->slot_bytes(), 0);
      std::memcpy(lane::SlotPayload(s), slow.data(), slow.size());
      s->request_bytes = slow.size();
      s->state.store(lane::kRequest);
      auto* h = static_cast<lane::RingHeader*>(c->ring());
      h->doorbell.fetch_add(1);
      lane::FutexWakeAll(&h->doorbell);
      while (s->state.load() == lane::kRequest) {
      }
      (void)!write(p[1], "r", 1);
      for (;;) pause();
    }
    close(p[1]);
    char ch = 0;
    ASSERT_EQ(read(p[0], &ch, 1), 1);
    close(p[0]);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  EXPECT_TRUE(Eventually([&] { return LanesOpen(*ld.d) == 0; })) << LanesOpen(*ld.d);
  EXPECT_TRUE(Eventually([&] { return OpenFds(daemon) <= fds0; }))
      << "fds: " << fds0 << " before, " << OpenFds(daemon) << " after";
  EXPECT_TRUE(Eventually([&] { return RingMappings(daemon) == 0; })) << RingMappings(daemon);
  auto lane = ld.Connect();
  v1::ExecuteResponse r;
  EXPECT_TRUE(lane->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
}

TEST(LaneTest, DrainAnswersInFlightThenRefuses) {
  LaneDaemon ld({"--enable_test_ops"});
  ASSERT_TRUE(ld.d->ok());
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  grpc::Status in_flight;
  std::thread t([&] {
    v1::ExecuteResponse r;
    in_flight = lane->Execute(SleepRequest(300), &r);
  });
  auto* s = lane::SlotAt(lane->ring(), lane->slot_bytes(), 0);
  ASSERT_TRUE(Eventually([&] { return s->state.load() == lane::kRunning; }));
  kill(ld.d->pid(), SIGTERM);
  auto* h = static_cast<lane::RingHeader*>(lane->ring());
  ASSERT_TRUE(Eventually([&] { return h->closed.load() == 1; }));
  v1::ExecuteResponse r;
  EXPECT_EQ(lane->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  t.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_EQ(ld.d->Terminate(), 0);
}

TEST(LaneTest, InflightQuotaCountsLaneAndGrpcTogether) {
  LaneDaemon ld({"--enable_test_ops", "--quota_inflight=1"});
  ASSERT_TRUE(ld.d->ok());
  auto busy = ld.Connect();
  auto other = ld.Connect();
  ASSERT_TRUE(busy && other);
  grpc::Status first;
  std::thread t([&] {
    v1::ExecuteResponse r;
    first = busy->Execute(SleepRequest(400), &r);
  });
  ASSERT_TRUE(Eventually([&] {
    return SeriesValue(ld.d->Metrics(), "kerneld_principal_requests_inflight_max", {})
               .value_or(0) >= 1;
  }));
  // The same uid, on another lane and on gRPC's unix socket: over quota.
  v1::ExecuteResponse r;
  const grpc::Status by_lane = other->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r);
  EXPECT_EQ(by_lane.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << by_lane.error_message();
  EXPECT_EQ(ld.d->unix_client().Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  t.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_TRUE(other->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
}

TEST(LaneTest, ARequestPastItsDeadlineIsNotRun) {
  LaneDaemon ld({"--enable_test_ops", "--cpu_workers=1"});
  ASSERT_TRUE(ld.d->ok());
  auto busy = ld.Connect();
  auto late = ld.Connect();
  ASSERT_TRUE(busy && late);
  std::thread t([&] {
    v1::ExecuteResponse r;
    EXPECT_TRUE(busy->Execute(SleepRequest(300), &r).ok());
  });
  ASSERT_TRUE(Eventually([&] {
    return SeriesValue(ld.d->Metrics(), "kerneld_principal_requests_inflight_max", {})
               .value_or(0) >= 1;
  }));
  // 5 ms to live behind 300 ms of work on the one worker; the slot's own
  // timeout, read by the daemon (the client waits without one).
  std::string bytes;
  SleepRequest(1).SerializeToString(&bytes);
  auto* s = lane::SlotAt(late->ring(), late->slot_bytes(), 0);
  std::memcpy(lane::SlotPayload(s), bytes.data(), bytes.size());
  s->request_bytes = bytes.size();
  s->timeout_us = 5000;
  s->state.store(lane::kRequest);
  auto* h = static_cast<lane::RingHeader*>(late->ring());
  h->doorbell.fetch_add(1);
  lane::FutexWakeAll(&h->doorbell);
  ASSERT_TRUE(Eventually([&] { return s->state.load() == lane::kResponse; }));
  EXPECT_EQ(s->status_code, static_cast<int32_t>(grpc::StatusCode::DEADLINE_EXCEEDED))
      << std::string(lane::SlotPayload(s), s->response_bytes);
  t.join();
}

TEST(LaneTest, KernelctlRunsOnTheLaneAndSaysWhenThereIsNone) {
  LaneDaemon ld;
  ASSERT_TRUE(ld.d->ok());
  const std::string ctl = std::string(KERNELCTL_BINARY) + " --target " + ld.d->unix_target();
  std::string out;
  EXPECT_EQ(RunCapture(ctl + " --lane " + ld.path +
                           " run scale --attr factor=2 --repeat 50 --check --via shm",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + " --lane " + ld.path + " run scale --attr factor=2 --check", &out), 0)
      << out;
  EXPECT_EQ(SeriesValue(ld.d->Metrics(), "kerneld_lane_requests_total", {"code=\"OK\""}), 51);
  // No lane there: an error that says so, not gRPC instead.
  EXPECT_NE(RunCapture(ctl + " --lane " + ld.dir + "/nothing.sock run scale --attr factor=2", &out),
            0);
  EXPECT_NE(out.find("no kerneld lane at"), std::string::npos) << out;
}

TEST(LaneTest, OneUidHoldsAtMostQuotaLanes) {
  LaneDaemon ld({"--quota_lanes=2"});
  ASSERT_TRUE(ld.d->ok());
  auto a = ld.Connect();
  auto b = ld.Connect();
  ASSERT_TRUE(a && b);
  grpc::Status st;
  EXPECT_EQ(LaneClient::Connect(ld.path, "", &st), nullptr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("--quota_lanes"), std::string::npos) << st.error_message();
  a.reset();  // closed: its lane is reclaimed, and the uid may open another
  std::unique_ptr<LaneClient> c;
  EXPECT_TRUE(Eventually([&] {
    grpc::Status s2;
    c = LaneClient::Connect(ld.path, "", &s2);
    return c != nullptr;
  }));
  v1::ExecuteResponse r;
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
}

TEST(LaneTest, RequestLogNamesTheLanesPrincipal) {
  LaneDaemon ld({"--log_level=1"});
  ASSERT_TRUE(ld.d->ok());
  auto lane = ld.Connect();
  ASSERT_TRUE(lane);
  auto req = ScaleRequest(DType::kFloat32, {8}, 2.0);
  req.set_request_id("lane-7");
  v1::ExecuteResponse r;
  ASSERT_TRUE(lane->Execute(req, &r).ok());
  EXPECT_EQ(r.request_id(), "lane-7");
  const std::string want = "principal=uid:" + std::to_string(geteuid());
  EXPECT_TRUE(Eventually([&] {
    const std::string log = ld.d->Log();
    const size_t at = log.find("id=lane-7 ");
    return at != std::string::npos && log.find(want, at) < log.find('\n', at);
  })) << ld.d->Log();
}

TEST(LaneTest, ALaneSocketThatIsAListenSocketIsRefusedAtStart) {
  char tmpl[] = "/tmp/kerneld-lane-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::string out;
  EXPECT_NE(RunCapture(std::string(KERNELD_BINARY) + " --listen=unix:" + dir +
                           "/k.sock --lane_socket=" + dir + "/k.sock --metrics_listen=off",
                       &out),
            0);
  EXPECT_NE(out.find("is a --listen socket too"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(LaneTest, IdleLanesCostNearlyNoCpu) {
  LaneDaemon ld;
  ASSERT_TRUE(ld.d->ok());
  std::vector<std::unique_ptr<LaneClient>> lanes;
  for (int i = 0; i < 8; ++i) {
    lanes.push_back(ld.Connect());
    v1::ExecuteResponse r;
    ASSERT_TRUE(lanes.back()->Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &r).ok());
  }
  auto cpu_ticks = [&] {
    std::ifstream f("/proc/" + std::to_string(ld.d->pid()) + "/stat");
    std::string line;
    std::getline(f, line);
    std::istringstream in(line.substr(line.rfind(')') + 2));
    std::vector<std::string> fields;
    for (std::string w; in >> w;) fields.push_back(w);
    return std::stoll(fields[11]) + std::stoll(fields[12]);  // utime + stime
  };
  const long hz = sysconf(_SC_CLK_TCK);
  const long long t0 = cpu_ticks();
  const auto w0 = Clock::now();
  // A measurement window, not a synchronization: the daemon is idle in it.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double secs = std::chrono::duration<double>(Clock::now() - w0).count();
  const double share = static_cast<double>(cpu_ticks() - t0) / static_cast<double>(hz) / secs;
  RecordProperty("idle_cpu_percent", std::to_string(share * 100));
  EXPECT_LT(share, 0.03) << "8 idle lanes took " << share * 100 << "% of a core";
}

}  // namespace
}  // namespace kerneld::testing
