#include "auth/peer_listener.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace kerneld::server {

void PeerTable::Set(int fd, const PeerCred& cred) {
  std::lock_guard<std::mutex> lock(mu_);
  by_fd_[fd] = cred;
}

std::optional<PeerCred> PeerTable::Find(absl::string_view peer) const {
  if (peer.rfind("fd:", 0) != 0) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(peer.substr(3), &fd)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

namespace {
constexpr absl::string_view kUnix = "unix:";
constexpr absl::string_view kAbstract = "unix-abstract:";
}  // namespace

UnixPeerListener::UnixPeerListener(const std::string& address, PeerTable* table) : table_(table) {
  abstract_ = absl::StartsWith(address, kAbstract);
  path_ = address.substr(abstract_ ? kAbstract.size() : kUnix.size());
}

bool UnixPeerListener::Serves(const std::string& address) {
  return absl::StartsWith(address, kUnix) || absl::StartsWith(address, kAbstract);
}

std::string UnixPeerListener::Bind() {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // An abstract name takes sun_path[0] = '\0' before it, and its length is
  // the address length (gRPC's unix-abstract: names the same way).
  const size_t room = sizeof sa.sun_path - 1;
  if (path_.empty() || path_.size() > room)
    return std::string(abstract_ ? "abstract unix socket name " : "unix socket path ") + path_ +
           " is empty or longer than " + std::to_string(room) + " bytes";
  std::memcpy(sa.sun_path + (abstract_ ? 1 : 0), path_.data(), path_.size());
  const socklen_t len =
      abstract_ ? static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + path_.size())
                : static_cast<socklen_t>(sizeof sa);
  // A socket file left by a daemon that died is replaced, as gRPC does; any
  // other kind of file is not ours to remove.
  struct stat st {};
  if (!abstract_ && lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path_.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return std::string("socket(AF_UNIX): ") + std::strerror(errno);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
      listen(listen_fd_, 128) != 0) {
    std::string err = std::strerror(errno);
    close(listen_fd_);
    listen_fd_ = -1;
    return err;
  }
  if (pipe2(wake_, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  return "";
}

void UnixPeerListener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void UnixPeerListener::AcceptLoop(grpc::Server* server) {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "kerneld: poll on %s: %s; no longer accepting there\n", path_.c_str(),
                   std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop()
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // EMFILE and friends: back off instead of spinning on a ready socket.
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) usleep(10000);
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);  // a peer we cannot name is not served
      continue;
    }
    // Recorded before gRPC sees the descriptor: its first call finds it.
    table_->Set(fd, PeerCred{cred.pid, cred.uid, cred.gid});
    grpc::AddInsecureChannelFromFd(server, fd);  // gRPC owns fd from here
  }
}

void UnixPeerListener::Stop() {
  if (wake_[1] >= 0) {
    if (write(wake_[1], "x", 1) < 0) { /* the thread also stops when the pipe closes */
    }
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    if (!abstract_) unlink(path_.c_str());
  }
  for (int& fd : wake_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

}  // namespace kerneld::server
