// The open ExecuteStreams of the daemon: the limits on how many may be open
// (--max_streams daemon-wide, --quota_streams per principal), and the list
// the drain walks to end every open stream with UNAVAILABLE.
//
// An idle stream costs the daemon ~18 KiB (gRPC's call and the reactor):
// without a bound, 100,000 streams took 1.6 GiB. gRPC's own
// max-concurrent-streams setting (--max_streams_per_connection) bounds one
// connection; these bound the daemon and each principal, with an error the
// client can act on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "buffers/buffer_registry.h"
#include "kerneld/status.h"

namespace kerneld::server {

// What the registry asks of an open stream (ExecuteStreamReactor).
class DrainableStream {
 public:
  virtual ~DrainableStream() = default;
  // Ends the stream with UNAVAILABLE once the answers already due are
  // written; reads no more messages.
  virtual void Drain() = 0;
  // Keeps the stream alive across Drain() (taken under the registry's lock).
  virtual void Ref() = 0;
  virtual void Unref() = 0;
};

class StreamRegistry {
 public:
  struct Limits {
    int64_t max_streams = 0;    // daemon-wide; 0: none
    int64_t per_principal = 0;  // per principal; 0: none
  };
  explicit StreamRegistry(Limits limits) : limits_(limits) {}

  // Counts `s` as open for `who`: OK, RESOURCE_EXHAUSTED (a limit, named
  // with its flag) or UNAVAILABLE (draining).
  Status Open(DrainableStream* s, const Principal& who);
  // `s` ended (its Finish was issued): no longer counted. Once only.
  void Close(DrainableStream* s, const Principal& who);

  // Refuses new streams (UNAVAILABLE) and drains every open one.
  void BeginDrain();
  // Waits until no stream is open or `deadline`; whether none is.
  bool WaitAllClosed(std::chrono::steady_clock::time_point deadline);
  int64_t open() const;

 private:
  const Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable closed_cv_;
  bool draining_ = false;
  std::unordered_set<DrainableStream*> open_;
  std::unordered_map<Principal, int64_t> by_principal_;  // only principals with streams open
};

inline Status StreamRegistry::Open(DrainableStream* s, const Principal& who) {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_)
    return Unavailable(
        "kerneld is shutting down and accepts no new streams; retry on another replica");
  const int64_t total = static_cast<int64_t>(open_.size());
  if (limits_.max_streams > 0 && total >= limits_.max_streams)
    return ResourceExhausted("kerneld has " + std::to_string(total) +
                             " ExecuteStreams open, its limit (--max_streams); close idle "
                             "streams or send more requests over fewer streams, then retry");
  auto it = by_principal_.find(who);
  const int64_t mine = it == by_principal_.end() ? 0 : it->second;
  if (limits_.per_principal > 0 && mine >= limits_.per_principal)
    return ResourceExhausted("quota max_streams of principal " + Quote(who) + " reached: it has " +
                             std::to_string(mine) + " ExecuteStreams open, at most " +
                             std::to_string(limits_.per_principal) +
                             "; close streams before opening more, or ask the operator to raise "
                             "it (--quota_streams)");
  open_.insert(s);
  ++by_principal_[who];
  return Status();
}

inline void StreamRegistry::Close(DrainableStream* s, const Principal& who) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_.erase(s) == 0) return;
    if (auto it = by_principal_.find(who); it != by_principal_.end() && --it->second <= 0)
      by_principal_.erase(it);
  }
  closed_cv_.notify_all();
}

inline void StreamRegistry::BeginDrain() {
  std::vector<DrainableStream*> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    streams.assign(open_.begin(), open_.end());
    for (DrainableStream* s : streams) s->Ref();  // Close() waits for mu_: still alive
  }
  // Outside the lock: Drain() may finish the stream, and its OnDone closes it.
  for (DrainableStream* s : streams) {
    s->Drain();
    s->Unref();
  }
}

inline bool StreamRegistry::WaitAllClosed(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return closed_cv_.wait_until(lock, deadline, [this] { return open_.empty(); });
}

inline int64_t StreamRegistry::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(open_.size());
}

namespace internal {
inline std::atomic<StreamRegistry*> g_stream_registry{nullptr};
}  // namespace internal

// The registry the ExecuteStream handlers use; null: no limits (handlers
// run without a daemon in unit tests). Set by the daemon while it serves.
inline void SetStreamRegistry(StreamRegistry* r) { internal::g_stream_registry.store(r); }
inline StreamRegistry* CurrentStreamRegistry() { return internal::g_stream_registry.load(); }

}  // namespace kerneld::server
