// Unix-socket listeners whose peers' credentials (SO_PEERCRED) are known.
//
// gRPC's public API does not expose a connection's peer credentials: on a
// unix socket ServerContext::peer() is "unix:" plus the client's (usually
// empty) path, and the auth context of insecure or local credentials holds
// no uid. So kerneld accepts on the unix socket itself, reads SO_PEERCRED,
// records it under the descriptor's number, and hands the descriptor to
// gRPC with grpc::AddInsecureChannelFromFd. gRPC names such a connection's
// peer "fd:N" (src/core/ext/transport/chttp2/server/chttp2_server.cc,
// grpc_server_add_channel_from_fd), which is how a call finds its peer's
// credentials again. A descriptor number is reused only after gRPC closed
// it, and gRPC closes it only when the connection and its calls are gone,
// so a live call never reads a later connection's entry.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"

namespace kerneld::server {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// fd -> credentials of the connection accepted on it.
class PeerTable {
 public:
  void Set(int fd, const PeerCred& cred);
  // `peer` is ServerContext::peer(); nullopt unless it names a connection
  // accepted by a UnixPeerListener.
  std::optional<PeerCred> Find(absl::string_view peer) const;

 private:
  mutable std::mutex mu_;
  std::map<int, PeerCred> by_fd_;
};

class UnixPeerListener {
 public:
  // `address` is "unix:PATH" or "unix-abstract:NAME" (Linux's abstract
  // namespace: no file, gone with the last descriptor).
  UnixPeerListener(const std::string& address, PeerTable* table);
  // Whether `address` is one this listener serves.
  static bool Serves(const std::string& address);
  ~UnixPeerListener() { Stop(); }
  // Binds and listens (replacing a stale socket file); "" or why not.
  std::string Bind();
  // Accepts on a thread of its own, handing each connection to `server`.
  void Start(grpc::Server* server);
  // Stops accepting and removes the socket file. Connections already handed
  // to gRPC stay until the server shuts down.
  void Stop();

 private:
  void AcceptLoop(grpc::Server* server);
  std::string path_;  // the file's path, or the abstract name
  bool abstract_ = false;
  PeerTable* table_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that interrupts poll() on Stop
  std::thread thread_;
};

}  // namespace kerneld::server
