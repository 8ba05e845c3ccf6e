// The client's end of the same-host lane (docs/lane.md) as bytes: connect,
// send a serialized ExecuteRequest in a slot, wait for its answer. No gRPC
// and no protobuf, so that libkerneld_native (the Python client's library,
// which links neither protobuf nor a second copy of the messages) carries it
// as well as LaneClient (lane_client.h), which wraps it with the messages.
//
// A call is Submit, then Wait until it says kAnswered (or gives up). Wait
// may be called in slices (the Python client returns to the interpreter
// between them so that Ctrl-C works); Abandon leaves a slot whose answer
// is not wanted any more.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kerneld::client {

// A gRPC status code (0: OK) and its message, without gRPC.
struct LaneStatus {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

class LaneRing {
 public:
  // What Wait found.
  enum class Wait {
    kAnswered,  // the slot's answer is in *out (status in *st); the slot is free again
    kPending,   // wait_ns passed first; wait again (or Abandon)
    kFailed,    // no answer will be read (deadline, daemon gone): *st says why
    kNotTaken,  // the daemon is gone and never took the request: it may be sent again
  };

  // Connects to the lane socket at `path` ("unix:" prefix allowed) with a
  // bearer token ("": the connection's uid is the principal). Null, with
  // *error saying why, when there is no lane there or the daemon refused it.
  static std::unique_ptr<LaneRing> Connect(const std::string& path, const std::string& token,
                                           LaneStatus* error);
  ~LaneRing();
  LaneRing(const LaneRing&) = delete;
  LaneRing& operator=(const LaneRing&) = delete;

  // Takes a free slot (waiting for one while all are in flight), writes
  // `request` and rings the daemon. timeout_us > 0: the request's deadline
  // from now (the daemon does not run it later; Wait gives up then). The
  // slot's index, or -1 with *error when nothing was sent (draining, too
  // large for a slot).
  int Submit(std::string_view request, int64_t timeout_us, LaneStatus* error);
  // Waits up to wait_ns (< 0: until answered or failed) for slot's answer:
  // polls first (the adaptive spin), then sleeps on the slot's futex.
  Wait Await(int slot, int64_t wait_ns, LaneStatus* st, std::string* out);
  // The caller stops waiting for slot: it is free again once its answer
  // comes (the daemon cannot be told to drop a request it took).
  void Abandon(int slot);
  // Submit + Await until the end: *out gets the response's bytes when OK.
  LaneStatus Execute(std::string_view request, std::string* out, int64_t timeout_us);

  uint32_t slots() const { return slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  void* ring() const { return ring_; }
  int memfd() const { return memfd_; }
  // How long a waiting call polls its slot before it sleeps, at least (it
  // adapts upwards when answers come just after it slept).
  void set_spin_ns(int64_t spin_ns) {
    spin_ns_ = spin_ns;
    adaptive_spin_ns_.store(spin_ns);
  }

 private:
  LaneRing() = default;
  int AcquireSlot();
  void ReleaseSlot(int slot);
  bool DaemonGone();
  // Under mu_: marks slot abandoned (free once answered).
  void AbandonLocked(int slot);

  int sock_ = -1, memfd_ = -1;
  void* ring_ = nullptr;
  uint64_t ring_bytes_ = 0, slot_bytes_ = 0;
  uint32_t slots_ = 0;
  int64_t spin_ns_ = 50000;
  std::atomic<int64_t> adaptive_spin_ns_{50000};
  std::mutex mu_;
  std::condition_variable free_cv_;
  std::vector<int> free_;
  std::vector<bool> abandoned_;  // given up on: the daemon still owes the slot an answer
  // Per slot, for its Await calls: when it was sent, its deadline, the
  // spin it polls for, and when it first slept (0: not yet). Only the
  // slot's owner (the caller between Submit and the end of its wait)
  // touches them.
  struct Pending {
    int64_t start_ns = 0, deadline_ns = 0, spin_ns = 0, slept_at_ns = 0;
  };
  std::vector<Pending> pending_;
  uint64_t next_id_ = 1;
};

}  // namespace kerneld::client
