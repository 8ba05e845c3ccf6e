// Listeners that accept connections themselves, so that a call can be tied
// to the connection it came on: unix sockets (whose peers' credentials,
// SO_PEERCRED, name the caller) and plaintext TCP (where each connection
// without a token is a principal of its own; docs/security.md).
//
// gRPC's public API does not expose a connection: on a unix socket
// ServerContext::peer() is "unix:" plus the client's (usually empty) path,
// on TCP the client's address, which a later connection may reuse, and the
// auth context of insecure or local credentials holds no uid. So kerneld
// accepts on its plaintext sockets itself, records each connection under
// the descriptor's number (a serial that is never reused, the socket's
// inode, and for a unix socket the peer's credentials), and hands the
// descriptor to gRPC with grpc::AddInsecureChannelFromFd. gRPC names such a
// connection's peer "fd:N" (src/core/ext/transport/chttp2/server/
// chttp2_server.cc, grpc_server_add_channel_from_fd), which is how a call
// finds its connection again. A descriptor number is reused only after gRPC
// closed it, and gRPC closes it only when the connection and its calls are
// gone, so a live call never reads a later connection's entry.
//
// A connection is known to be gone when its descriptor number is accepted
// again, or when the sweeper (PeerTable::StartSweeper) finds the number
// closed or naming another file (fstat: another inode). The sweeper then
// reports the connection's serial, so whatever it owned can be released.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/strings/string_view.h"

namespace kerneld::server {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// What a call learns of the connection it came on.
struct PeerConnection {
  uint64_t serial = 0;           // unique for the daemon's life, from 1
  std::optional<PeerCred> cred;  // unix sockets only: the kernel's word
};

// fd -> the connection accepted on it.
class PeerTable {
 public:
  PeerTable() = default;
  ~PeerTable() { StopSweeper(); }
  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  // Records the connection just accepted on `fd` (before gRPC sees it) and
  // returns its serial. A connection recorded earlier under the same number
  // is gone: it is reported (see StartSweeper).
  uint64_t Add(int fd, std::optional<PeerCred> cred);
  // `peer` is ServerContext::peer(); nullopt unless it names a connection
  // accepted by a PeerListener.
  std::optional<PeerConnection> Find(absl::string_view peer) const;
  // Whether `peer` names a descriptor ("fd:N"), recorded or not.
  static bool IsFdPeer(absl::string_view peer);
  // Whether the connection with this serial is still recorded (not gone).
  bool Alive(uint64_t serial) const;
  size_t size() const;

  // Called, outside the table's lock, with the serial of every connection
  // without credentials (TCP) found gone. Set before connections arrive.
  using GoneFn = std::function<void(uint64_t serial)>;
  void OnGone(GoneFn fn) { on_gone_ = std::move(fn); }
  // Checks every recorded descriptor now (fstat); returns how many
  // connections were gone.
  int Sweep();
  // Sweeps on a thread of its own every `every`, until StopSweeper.
  void StartSweeper(std::chrono::milliseconds every);
  void StopSweeper();

 private:
  struct Entry {
    uint64_t serial;
    dev_t dev;
    ino_t ino;
    std::optional<PeerCred> cred;
  };
  void Report(const std::vector<uint64_t>& gone) const;

  mutable std::mutex mu_;
  std::map<int, Entry> by_fd_;
  std::unordered_set<uint64_t> live_;
  uint64_t next_serial_ = 1;
  GoneFn on_gone_;
  std::mutex sweep_mu_;
  std::condition_variable sweep_cv_;
  bool sweep_stop_ = false;
  std::thread sweeper_;
};

// Accepts connections on the sockets of one --listen address, records
// each in a PeerTable and hands it to gRPC.
class PeerListener {
 public:
  // `address` is "unix:PATH", "unix-abstract:NAME" (Linux's abstract
  // namespace: no file, gone with the last descriptor) or a TCP "HOST:PORT"
  // ("[V6]:PORT"; port 0: one the kernel picks; 0.0.0.0 or [::]: every
  // address, IPv4 and IPv6, as gRPC binds them).
  PeerListener(const std::string& address, PeerTable* table);
  ~PeerListener() { Stop(); }
  // Whether `address` is a unix socket (the peer's uid is known).
  static bool ServesUnix(const std::string& address);
  // Whether `address` is a TCP address this listener can bind itself.
  static bool ServesTcp(const std::string& address);
  static bool Serves(const std::string& address) {
    return ServesUnix(address) || ServesTcp(address);
  }
  // Binds and listens (a unix socket replaces a stale socket file); "" or
  // why not, as the system said it (EADDRINUSE: "Address already in use").
  std::string Bind();
  // The address as bound: TCP with the port the kernel picked.
  std::string bound_address() const { return bound_; }
  // Accepts on a thread of its own, handing each connection to `server`.
  void Start(grpc::Server* server);
  // Stops accepting and removes the socket file. Connections already handed
  // to gRPC stay until the server shuts down.
  void Stop();

 private:
  std::string BindUnix();
  std::string BindTcp();
  void AcceptLoop(grpc::Server* server);
  void CloseListeners();
  std::string address_, bound_;
  std::string path_;  // unix: the file's path, or the abstract name
  bool unix_ = false, abstract_ = false;
  PeerTable* table_;
  std::vector<int> listen_fds_;
  int wake_[2] = {-1, -1};  // a pipe that interrupts poll() on Stop
  std::thread thread_;
};

}  // namespace kerneld::server
