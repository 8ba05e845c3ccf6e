#include "lane/lane.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "auth/principal_name.h"
#include "auth/principal_stats.h"
#include "kerneld_lane/futex.h"
#include "metrics/lane_metrics.h"

namespace kerneld::server {

namespace {

using lane::SlotHeader;

// How long a connection may take to send its hello.
constexpr int kHelloTimeoutMs = 5000;
// How long an idle lane's thread sleeps before it looks at the socket again
// (a client that died without ringing): ten wake-ups a second per idle lane.
constexpr int64_t kIdleCheckNs = 100'000'000;
// How often a lane kept busy (or rung on and on) looks at its socket.
constexpr int64_t kBusyCheckNs = 10'000'000;
// The most a lane's spin grows to by itself (--lane_spin_us sets its floor).
constexpr int64_t kMaxSpinNs = 1'000'000;

// Lane threads spinning now, daemon-wide, and how many may: spinning
// threads beyond the cores (less one for the workers) only take the CPU
// from the requests they wait for (2 cores, 8 busy lanes: p50 1.4 ms).
std::atomic<int> g_spinning{0};
int MaxSpinners() {
  static const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
  return n;
}

// One read of a word the client may be writing: volatile, so that the
// compiler neither repeats nor defers it; every later use is of the copy.
uint64_t ReadOnce(const uint64_t& v) { return *static_cast<const volatile uint64_t*>(&v); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One request on the lane: the daemon's copy of it, and its response.
struct Lane::Call {
  std::shared_ptr<Lane> lane;
  uint32_t slot = 0;
  uint64_t id = 0;
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
};

Lane::Lane(int sock, PeerCred cred, RequestRunner& runner, const Authenticator* auth,
           LaneOptions opt)
    : sock_(sock), cred_(cred), runner_(runner), auth_(auth), opt_(opt) {
  busy_ = std::make_unique<std::atomic<bool>[]>(opt_.slots);
  for (uint32_t i = 0; i < opt_.slots; ++i) busy_[i].store(false);
}

Lane::~Lane() {
  if (ring_ != nullptr) munmap(ring_, ring_bytes_);
  close(sock_);
  if (counted_open_) LaneStats::Global().open.fetch_sub(1);
}

void Lane::Stop() {
  stop_.store(true);
  // Wakes a thread still waiting for the hello; a client learns the lane
  // is closed.
  shutdown(sock_, SHUT_RDWR);
  if (lane::RingHeader* h = published_.load(std::memory_order_acquire); h != nullptr) {
    // The daemon's own mapping: the client cannot take it away.
    h->doorbell.fetch_add(1);
    lane::FutexWakeAll(&h->doorbell);
  }
}

void Lane::Close() {
  if (lane::RingHeader* h = published_.load(std::memory_order_acquire); h != nullptr)
    h->closed.store(1);
}

void Lane::Refuse(StatusCode code, const std::string& why) {
  LaneStats::Global().refused.fetch_add(1);
  lane::Welcome w;
  w.code = static_cast<int32_t>(code);
  w.message_bytes = static_cast<uint32_t>(std::min<size_t>(why.size(), lane::kMaxMessageBytes));
  std::memcpy(w.message, why.data(), w.message_bytes);
  (void)send(sock_, &w, sizeof w, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool Lane::Handshake() {
  pollfd p{sock_, POLLIN, 0};
  if (poll(&p, 1, kHelloTimeoutMs) <= 0 || stop_.load()) {
    Refuse(StatusCode::kDeadlineExceeded, "no hello within 5 s");
    return false;
  }
  std::vector<char> buf(sizeof(lane::Hello) + lane::kMaxTokenBytes + 1);
  const ssize_t n = recv(sock_, buf.data(), buf.size(), MSG_DONTWAIT);
  lane::Hello hello;
  if (n < static_cast<ssize_t>(sizeof hello)) {
    Refuse(StatusCode::kInvalidArgument, "the hello is shorter than its header");
    return false;
  }
  std::memcpy(&hello, buf.data(), sizeof hello);
  if (hello.magic != lane::kHelloMagic || hello.version != lane::kVersion) {
    Refuse(StatusCode::kInvalidArgument,
           "not a kerneld lane hello of version " + std::to_string(lane::kVersion));
    return false;
  }
  if (hello.token_bytes > lane::kMaxTokenBytes ||
      static_cast<size_t>(n) != sizeof hello + hello.token_bytes) {
    Refuse(StatusCode::kInvalidArgument, "the hello's token length does not match its size");
    return false;
  }
  token_.assign(buf.data() + sizeof hello, hello.token_bytes);
  if (auth_ != nullptr) {
    Identity id;
    if (Status st = auth_->IdentifyPeer(cred_, token_, &id); !st.ok()) {
      Refuse(st.code(), st.message());
      return false;
    }
  }
  // The ring: sealed, so that neither side can shrink it (no SIGBUS in the
  // daemon) or grow it; the daemon keeps only its mapping.
  ring_bytes_ = lane::RingBytes(opt_.slots, opt_.slot_bytes);
  const int fd = memfd_create("kerneld-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    Refuse(StatusCode::kResourceExhausted, std::string("memfd_create: ") + std::strerror(errno));
    return false;
  }
  void* ring = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(ring_bytes_)) == 0)
    ring = mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (ring == MAP_FAILED ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string err = std::strerror(errno);
    if (ring != MAP_FAILED) munmap(ring, ring_bytes_);
    close(fd);
    Refuse(StatusCode::kResourceExhausted, "cannot make the lane's ring: " + err);
    return false;
  }
  ring_ = ring;
  header_ = new (ring_) lane::RingHeader{};
  header_->magic = lane::kRingMagic;
  header_->version = lane::kVersion;
  header_->slots = opt_.slots;
  header_->slot_bytes = opt_.slot_bytes;
  for (uint32_t i = 0; i < opt_.slots; ++i)
    new (lane::SlotAt(ring_, opt_.slot_bytes, i)) SlotHeader{};
  published_.store(header_, std::memory_order_release);

  lane::Welcome w;
  w.slots = opt_.slots;
  w.slot_bytes = opt_.slot_bytes;
  w.ring_bytes = ring_bytes_;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&w, sizeof w};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  const bool sent =
      sendmsg(sock_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof w);
  close(fd);
  if (!sent) return false;
  LaneStats::Global().opened.fetch_add(1);
  LaneStats::Global().open.fetch_add(1);
  counted_open_ = true;
  return true;
}

bool Lane::ClientGone() {
  if (gone_->load()) return true;
  pollfd p{sock_, POLLIN | POLLRDHUP, 0};
  // The client sends nothing after its hello: anything readable is its end
  // (or a protocol breach, which ends the lane the same way).
  if (poll(&p, 1, 0) != 0) gone_->store(true);
  return gone_->load();
}

void Lane::Run() {
  if (!Handshake()) return;
  // The spin adapts: a request that arrives soon after the thread went to
  // sleep says the spin was too short for this client's pace (its own
  // wake-up, its work between requests), so it doubles, up to kMaxSpinNs
  // or the flag's value if larger; a sleep that ends without a request
  // halves it again. A loaded host otherwise settles where every request
  // pays two futex wake-ups.
  const int64_t max_spin = std::max(opt_.spin_ns, std::min<int64_t>(16 * opt_.spin_ns, kMaxSpinNs));
  int64_t spin = opt_.spin_ns;
  int64_t last_busy = NowNs(), last_check = last_busy;
  uint32_t spins = 0;
  bool spinning = false;  // counted in g_spinning
  while (!stop_.load(std::memory_order_relaxed)) {
    if (TakeReady() > 0) {
      last_busy = NowNs();
      if (last_busy - last_check > kBusyCheckNs) {
        last_check = last_busy;
        if (ClientGone()) break;
      }
      continue;
    }
    const int64_t now = NowNs();
    if (now - last_busy < spin &&
        (spinning || g_spinning.load(std::memory_order_relaxed) < MaxSpinners())) {
      if (!spinning) {
        spinning = true;
        g_spinning.fetch_add(1, std::memory_order_relaxed);
      }
      // More lanes than cores: let the others in now and then.
      if (++spins % 64 == 0)
        sched_yield();
      else
        lane::CpuRelax();
      if (now - last_check > kBusyCheckNs) {
        last_check = now;
        if (ClientGone()) break;
      }
      continue;
    }
    if (spinning) {
      spinning = false;
      g_spinning.fetch_sub(1, std::memory_order_relaxed);
    }
    const uint32_t bell = header_->doorbell.load(std::memory_order_acquire);
    header_->daemon_sleeping.store(1, std::memory_order_seq_cst);
    if (TakeReady() > 0) {
      header_->daemon_sleeping.store(0, std::memory_order_relaxed);
      last_busy = NowNs();
      continue;
    }
    last_check = now;
    if (ClientGone()) break;
    lane::FutexWait(&header_->doorbell, bell, kIdleCheckNs);
    header_->daemon_sleeping.store(0, std::memory_order_relaxed);
    const int64_t woke = NowNs();
    if (header_->doorbell.load(std::memory_order_acquire) == bell) {
      // Timed out: idle. No spin now; the next burst starts from less.
      spin = std::max(opt_.spin_ns, spin / 2);
      continue;
    }
    // Rung: requests are coming; look again for a while.
    if (woke - now < 2 * spin)
      spin = std::min(max_spin, 2 * spin);
    else
      spin = std::max(opt_.spin_ns, spin / 2);
    last_busy = woke;
  }
  if (spinning) g_spinning.fetch_sub(1, std::memory_order_relaxed);
}

int Lane::TakeReady() {
  int taken = 0;
  for (uint32_t i = 0; i < opt_.slots; ++i) {
    if (busy_[i].load(std::memory_order_acquire)) continue;
    SlotHeader* s = lane::SlotAt(ring_, opt_.slot_bytes, i);
    if (s->state.load(std::memory_order_acquire) != lane::kRequest) continue;
    Take(i);
    ++taken;
  }
  return taken;
}

CallControl Lane::ControlFor(uint64_t timeout_us) {
  CallControl c;
  if (timeout_us > 0) {
    // Bounded: a client's huge timeout must not overflow the clock.
    const uint64_t us = std::min<uint64_t>(timeout_us, uint64_t{365} * 24 * 3600 * 1000000);
    c.deadline =
        std::chrono::system_clock::now() + std::chrono::microseconds(static_cast<int64_t>(us));
  }
  c.cancelled = [gone = gone_] { return gone->load(std::memory_order_relaxed); };
  c.transport = Transport::kLane;
  Identity id;
  if (auth_ != nullptr) {
    // Every request, as gRPC identifies every call: a token revoked by a
    // reload stops the lane's later requests; --rate_limit applies.
    if (Status st = auth_->AdmitPeer(cred_, token_, &id); !st.ok()) {
      c.refused = std::move(st);
      return c;
    }
  } else {
    id.principal = UidPrincipal(cred_.uid);
    id.source = Identity::Source::kPeerUid;
  }
  c.principal = std::move(id.principal);
  c.principal_inflight = PrincipalStats::Global().Inflight(c.principal);
  c.max_inflight = id.quota.max_inflight;
  return c;
}

void Lane::Take(uint32_t i) {
  SlotHeader* s = lane::SlotAt(ring_, opt_.slot_bytes, i);
  uint32_t expected = lane::kRequest;
  if (!s->state.compare_exchange_strong(expected, lane::kRunning, std::memory_order_acq_rel))
    return;
  busy_[i].store(true, std::memory_order_release);
  // One copy of the header, then of the bytes it describes; nothing below
  // reads the slot again, whatever the client writes meanwhile.
  struct {
    uint64_t request_id, request_bytes, timeout_us;
  } h{ReadOnce(s->request_id), ReadOnce(s->request_bytes), ReadOnce(s->timeout_us)};
  if (h.request_bytes > opt_.slot_bytes) {
    Answer(i, h.request_id, StatusCode::kInvalidArgument,
           "the slot's request length " + std::to_string(h.request_bytes) +
               " is larger than the lane's slots (" + std::to_string(opt_.slot_bytes) + " bytes)");
    return;
  }
  std::string bytes(lane::SlotPayload(s), lane::SlotPayload(s) + h.request_bytes);
  auto call = std::make_unique<Call>();
  call->lane = shared_from_this();
  call->slot = i;
  call->id = h.request_id;
  if (!call->req.ParseFromString(bytes)) {
    Answer(i, h.request_id, StatusCode::kInvalidArgument,
           "the slot's " + std::to_string(h.request_bytes) +
               " bytes are not a kerneld.v1.ExecuteRequest");
    return;
  }
  Call* c = call.release();  // deleted by its completion
  runner_.Start(c->req, &c->resp, ControlFor(h.timeout_us), [c](const Status& st) {
    std::unique_ptr<Call> owned(c);
    Lane& lane = *c->lane;
    if (!st.ok()) {
      lane.Answer(c->slot, c->id, st.code(), st.message());
      return;
    }
    std::string out;
    if (!c->resp.SerializeToString(&out)) {
      lane.Answer(c->slot, c->id, StatusCode::kInternal, "cannot serialize the response");
    } else if (out.size() > lane.opt_.slot_bytes) {
      lane.Answer(c->slot, c->id, StatusCode::kResourceExhausted,
                  "the response (" + std::to_string(out.size()) +
                      " bytes) is larger than the lane's slots (" +
                      std::to_string(lane.opt_.slot_bytes) +
                      " bytes, --lane_slot_kb): place outputs in a buffer, or use gRPC");
    } else {
      lane.Answer(c->slot, c->id, StatusCode::kOk, out);
    }
  });
}

void Lane::Answer(uint32_t i, uint64_t id, StatusCode code, const std::string& bytes) {
  LaneStats::Global().CountRequest(code);
  SlotHeader* s = lane::SlotAt(ring_, opt_.slot_bytes, i);
  const size_t n = std::min<size_t>(bytes.size(), opt_.slot_bytes);
  std::memcpy(lane::SlotPayload(s), bytes.data(), n);
  s->request_id = id;
  s->response_bytes = n;
  s->status_code = static_cast<int32_t>(code);
  s->state.store(lane::kResponse, std::memory_order_seq_cst);
  busy_[i].store(false, std::memory_order_release);
  if (s->client_waiting.load(std::memory_order_seq_cst) != 0) lane::FutexWakeAll(&s->state);
}

}  // namespace kerneld::server
