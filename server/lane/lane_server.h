// The same-host lane's listener (docs/lane.md): a SOCK_SEQPACKET unix
// socket (--lane_socket). Each connection is a lane with a thread of its
// own (lane/lane.h); the peer's SO_PEERCRED names its principal, as on the
// gRPC unix socket. A lane whose client is gone is reaped here: its thread
// joined, its socket closed, its ring unmapped once its last request is
// answered.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "auth/authenticator.h"
#include "config.h"
#include "lane/lane.h"
#include "service/request_runner.h"

namespace kerneld::server {

class LaneServer {
 public:
  LaneServer(const Config& cfg, RequestRunner& runner, const Authenticator* auth);
  ~LaneServer() { Stop(); }
  LaneServer(const LaneServer&) = delete;
  LaneServer& operator=(const LaneServer&) = delete;

  // Binds cfg.lane_socket (a stale socket file is replaced); "" or why not.
  std::string Bind();
  void Start();
  // SIGTERM: no new lanes; open rings are marked closed, and their requests
  // are answered by the draining runner (UNAVAILABLE for new ones).
  void BeginDrain();
  // Ends every lane's thread and the listener; requests in flight keep
  // their lanes until they are answered. Idempotent.
  void Stop();
  const std::string& path() const { return path_; }
  size_t open() const;

 private:
  struct Entry {
    std::shared_ptr<Lane> lane;
    std::thread thread;
    uid_t uid = 0;
  };
  void AcceptLoop();
  void Accept();
  void Reap();

  const Config& cfg_;
  RequestRunner& runner_;
  const Authenticator* auth_;
  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop, and a lane thread that ended
  std::atomic<bool> stopping_{false}, draining_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Entry> lanes_;
  std::map<uid_t, int> lanes_by_uid_;  // --quota_lanes
  std::vector<uint64_t> ended_;        // lanes whose threads returned, to join
};

}  // namespace kerneld::server
