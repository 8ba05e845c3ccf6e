#include "lane_ring.h"

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "kerneld_lane/futex.h"
#include "kerneld_lane/protocol.h"

namespace kerneld::client {

namespace {

// gRPC's codes, by number (this file links no gRPC).
constexpr int kInvalidArgument = 3;
constexpr int kDeadlineExceeded = 4;
constexpr int kResourceExhausted = 8;
constexpr int kUnavailable = 14;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

LaneStatus Unavailable(const std::string& why) { return {kUnavailable, why}; }

}  // namespace

std::unique_ptr<LaneRing> LaneRing::Connect(const std::string& target, const std::string& token,
                                            LaneStatus* error) {
  const std::string path = target.rfind("unix:", 0) == 0 ? target.substr(5) : target;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa.sun_path) {
    *error = {kInvalidArgument, "the lane socket path is empty or too long: " + path};
    return nullptr;
  }
  if (token.size() > lane::kMaxTokenBytes) {
    *error = {kInvalidArgument, "the token is longer than 4096 bytes"};
    return nullptr;
  }
  std::memcpy(sa.sun_path, path.data(), path.size());
  std::unique_ptr<LaneRing> c(new LaneRing());
  c->sock_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (c->sock_ < 0 || connect(c->sock_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *error = Unavailable("no kerneld lane at " + path + ": " + std::strerror(errno) +
                         " (is kerneld running with --lane_socket=" + path + "?)");
    return nullptr;
  }
  std::string hello(sizeof(lane::Hello), '\0');
  lane::Hello h;
  h.token_bytes = static_cast<uint32_t>(token.size());
  std::memcpy(hello.data(), &h, sizeof h);
  hello += token;
  // A daemon that refuses at once (--max_lanes, --quota_lanes, draining)
  // answers before it reads the hello and closes: its welcome says why.
  std::string send_error;
  if (send(c->sock_, hello.data(), hello.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello.size()))
    send_error = std::string("cannot send the lane hello: ") + std::strerror(errno);
  pollfd p{c->sock_, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0) {
    *error = Unavailable(
        !send_error.empty() ? send_error : "the daemon did not answer the lane hello within 10 s");
    return nullptr;
  }
  lane::Welcome w;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&w, sizeof w};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(c->sock_, &msg, MSG_CMSG_CLOEXEC);
  // A daemon that refused and closed before reading the hello leaves
  // ECONNRESET pending ahead of its welcome; the error is reported once.
  if (n < 0 && errno == ECONNRESET) n = recvmsg(c->sock_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      std::memcpy(&c->memfd_, CMSG_DATA(cm), sizeof(int));
  if (n != static_cast<ssize_t>(sizeof w) || w.magic != lane::kWelcomeMagic) {
    *error =
        Unavailable(!send_error.empty() ? send_error
                                        : "the lane socket's answer is not a kerneld lane welcome");
    return nullptr;
  }
  if (w.code != 0) {
    *error = {w.code,
              std::string(w.message, std::min<uint32_t>(w.message_bytes, lane::kMaxMessageBytes))};
    return nullptr;
  }
  struct stat st {};
  if (c->memfd_ < 0 || w.slots == 0 || w.slots > lane::kMaxSlots ||
      w.slot_bytes > lane::kMaxSlotBytes ||
      w.ring_bytes != lane::RingBytes(w.slots, w.slot_bytes) || fstat(c->memfd_, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) < w.ring_bytes) {
    *error = Unavailable("the daemon's lane ring does not match its welcome");
    return nullptr;
  }
  c->ring_ = mmap(nullptr, w.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd_, 0);
  if (c->ring_ == MAP_FAILED) {
    c->ring_ = nullptr;
    *error = Unavailable(std::string("cannot map the lane ring: ") + std::strerror(errno));
    return nullptr;
  }
  c->ring_bytes_ = w.ring_bytes;
  c->slots_ = w.slots;
  c->slot_bytes_ = w.slot_bytes;
  c->abandoned_.assign(w.slots, false);
  c->pending_.assign(w.slots, Pending{});
  for (int i = static_cast<int>(w.slots) - 1; i >= 0; --i) c->free_.push_back(i);
  *error = {};
  return c;
}

LaneRing::~LaneRing() {
  if (ring_ != nullptr) munmap(ring_, ring_bytes_);
  if (memfd_ >= 0) close(memfd_);
  if (sock_ >= 0) close(sock_);
}

bool LaneRing::DaemonGone() {
  pollfd p{sock_, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) != 0;
}

int LaneRing::AcquireSlot() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // A slot given up on is free again once its answer came.
    for (uint32_t i = 0; i < slots_; ++i) {
      if (!abandoned_[i]) continue;
      auto* s = lane::SlotAt(ring_, slot_bytes_, i);
      if (s->state.load(std::memory_order_acquire) == lane::kResponse) {
        s->state.store(lane::kFree, std::memory_order_relaxed);
        abandoned_[i] = false;
        free_.push_back(static_cast<int>(i));
      }
    }
    if (!free_.empty()) {
      const int slot = free_.back();
      free_.pop_back();
      return slot;
    }
    // Every slot is in flight (or abandoned): wait for one, and look at the
    // abandoned ones now and then.
    free_cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

void LaneRing::ReleaseSlot(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  free_cv_.notify_one();
}

void LaneRing::AbandonLocked(int slot) { abandoned_[static_cast<size_t>(slot)] = true; }

void LaneRing::Abandon(int slot) {
  if (slot < 0 || static_cast<uint32_t>(slot) >= slots_) return;
  std::lock_guard<std::mutex> lock(mu_);
  AbandonLocked(slot);
}

int LaneRing::Submit(std::string_view request, int64_t timeout_us, LaneStatus* error) {
  auto* header = static_cast<lane::RingHeader*>(ring_);
  if (header->closed.load(std::memory_order_acquire) != 0) {
    *error = Unavailable("the daemon is draining: its lane takes no more requests");
    return -1;
  }
  if (request.size() > slot_bytes_) {
    *error = {kResourceExhausted, "the request (" + std::to_string(request.size()) +
                                      " bytes) is larger than the lane's slots (" +
                                      std::to_string(slot_bytes_) +
                                      " bytes): place tensors in buffers, or use gRPC"};
    return -1;
  }
  const int slot = AcquireSlot();
  auto* s = lane::SlotAt(ring_, slot_bytes_, static_cast<uint32_t>(slot));
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
  }
  std::memcpy(lane::SlotPayload(s), request.data(), request.size());
  s->request_id = id;
  s->request_bytes = request.size();
  s->timeout_us = timeout_us > 0 ? static_cast<uint64_t>(timeout_us) : 0;
  s->client_waiting.store(0, std::memory_order_relaxed);
  Pending& p = pending_[static_cast<size_t>(slot)];
  p.start_ns = NowNs();
  p.deadline_ns = timeout_us > 0 && timeout_us < INT64_MAX / 1000 - p.start_ns / 1000
                      ? p.start_ns + timeout_us * 1000
                      : INT64_MAX;
  p.spin_ns = adaptive_spin_ns_.load(std::memory_order_relaxed);
  p.slept_at_ns = 0;
  s->state.store(lane::kRequest, std::memory_order_seq_cst);
  header->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (header->daemon_sleeping.load(std::memory_order_seq_cst) != 0)
    lane::FutexWakeAll(&header->doorbell);
  *error = {};
  return slot;
}

LaneRing::Wait LaneRing::Await(int slot, int64_t wait_ns, LaneStatus* st, std::string* out) {
  auto* s = lane::SlotAt(ring_, slot_bytes_, static_cast<uint32_t>(slot));
  Pending& p = pending_[static_cast<size_t>(slot)];
  const int64_t called = NowNs();
  const int64_t end = wait_ns < 0 || wait_ns > INT64_MAX - called ? INT64_MAX : called + wait_ns;
  uint32_t spins = 0;
  uint32_t state;
  while ((state = s->state.load(std::memory_order_acquire)) != lane::kResponse) {
    const int64_t now = NowNs();
    if (now - p.start_ns < p.spin_ns && now < end) {
      if ((++spins & 63) == 0)
        sched_yield();  // more spinners than cores: let the daemon run
      else
        lane::CpuRelax();
      continue;
    }
    if (now >= p.deadline_ns || DaemonGone()) {
      const bool late = now >= p.deadline_ns;
      // A daemon that is gone and never took the request (its state still
      // says "request") cannot take it any more: the slot is ours again and
      // the request may go elsewhere. One that took it may have run it.
      uint32_t expected = lane::kRequest;
      if (!late &&
          s->state.compare_exchange_strong(expected, lane::kFree, std::memory_order_acq_rel)) {
        ReleaseSlot(slot);
        *st = Unavailable("the daemon closed the lane before taking the request");
        return Wait::kNotTaken;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        AbandonLocked(slot);
      }
      *st = late ? LaneStatus{kDeadlineExceeded, "no answer on the lane within the timeout"}
                 : Unavailable("the daemon closed the lane");
      return Wait::kFailed;
    }
    if (now >= end) return Wait::kPending;
    if (p.slept_at_ns == 0) p.slept_at_ns = now;
    s->client_waiting.store(1, std::memory_order_seq_cst);
    state = s->state.load(std::memory_order_seq_cst);
    if (state != lane::kResponse)
      lane::FutexWait(&s->state, state,
                      std::min({int64_t{100'000'000}, p.deadline_ns - now, end - now}));
    s->client_waiting.store(0, std::memory_order_relaxed);
  }
  // Adaptive, as the daemon's: an answer that came soon after this thread
  // went to sleep doubles the spin (up to 1 ms or set_spin_ns's, if
  // larger); one that took long halves it back to set_spin_ns's.
  if (p.slept_at_ns != 0) {
    const int64_t max_spin = std::max<int64_t>(spin_ns_, 1'000'000);
    adaptive_spin_ns_.store(NowNs() - p.slept_at_ns < 2 * p.spin_ns
                                ? std::min(max_spin, 2 * p.spin_ns)
                                : std::max(spin_ns_, p.spin_ns / 2),
                            std::memory_order_relaxed);
  }
  const int32_t code = s->status_code;
  const uint64_t n = std::min<uint64_t>(s->response_bytes, slot_bytes_);
  out->assign(lane::SlotPayload(s), n);
  s->state.store(lane::kFree, std::memory_order_relaxed);
  ReleaseSlot(slot);
  if (code != 0) {
    *st = {code, std::move(*out)};
    out->clear();
  } else {
    *st = {};
  }
  return Wait::kAnswered;
}

LaneStatus LaneRing::Execute(std::string_view request, std::string* out, int64_t timeout_us) {
  LaneStatus st;
  const int slot = Submit(request, timeout_us, &st);
  if (slot < 0) return st;
  Await(slot, -1, &st, out);
  return st;
}

}  // namespace kerneld::client
