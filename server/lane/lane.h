// One same-host lane (docs/lane.md): a client's ring of request/response
// slots in a sealed memfd, served by a thread of its own. The client is
// untrusted: every slot is copied into the daemon's memory once, before
// anything reads it, and every length is bounded by the lane's own copy of
// the ring's geometry, never by the ring's header.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "auth/authenticator.h"
#include "auth/peer_listener.h"
#include "kerneld_lane/protocol.h"
#include "service/request_runner.h"

namespace kerneld::server {

struct LaneOptions {
  uint32_t slots = 8;
  uint64_t slot_bytes = 256 << 10;
  int64_t spin_ns = 50000;  // a busy lane's thread polls this long before it sleeps
};

class Lane : public std::enable_shared_from_this<Lane> {
 public:
  // Takes `sock` (the accepted connection; closed with the lane).
  Lane(int sock, PeerCred cred, RequestRunner& runner, const Authenticator* auth, LaneOptions opt);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // The lane's thread: the hello, the ring, then requests until the client
  // is gone or Stop. Returns once it takes no more; requests in flight keep
  // the lane (and its ring) alive until they are answered.
  void Run();
  // Takes no more requests (its thread returns soon). Safe from any thread.
  void Stop();
  // Marks the ring closed: a client learns the daemon is draining. Requests
  // still get answered (UNAVAILABLE from the draining runner).
  void Close();

 private:
  struct Call;
  // The hello and welcome; false: the lane ends (the client was answered).
  bool Handshake();
  void Refuse(StatusCode code, const std::string& why);
  bool ClientGone();
  // Scans the slots; how many requests it took.
  int TakeReady();
  void Take(uint32_t i);
  // Writes a response into slot i and wakes the client; the slot is then
  // the client's again.
  void Answer(uint32_t i, uint64_t id, StatusCode code, const std::string& bytes);
  CallControl ControlFor(uint64_t timeout_us);

  const int sock_;
  const PeerCred cred_;
  RequestRunner& runner_;
  const Authenticator* auth_;
  const LaneOptions opt_;
  std::string token_;
  void* ring_ = nullptr;
  uint64_t ring_bytes_ = 0;
  lane::RingHeader* header_ = nullptr;
  // header_ once the ring is ready, for Stop and Close on other threads.
  std::atomic<lane::RingHeader*> published_{nullptr};
  // The daemon's own word of which slots it is answering: a client that
  // marks a running slot kRequest again is not served twice.
  std::unique_ptr<std::atomic<bool>[]> busy_;
  std::atomic<bool> stop_{false};
  // The client closed its socket; shared with the requests' cancellation
  // checks, which may outlive a call's hold on the lane.
  std::shared_ptr<std::atomic<bool>> gone_ = std::make_shared<std::atomic<bool>>(false);
  bool counted_open_ = false;
};

}  // namespace kerneld::server
