#include "auth/peer_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace kerneld::server {

// ---- PeerTable --------------------------------------------------------------

uint64_t PeerTable::Add(int fd, std::optional<PeerCred> cred) {
  struct stat st {};
  if (fstat(fd, &st) != 0) st = {};  // an accepted socket: cannot fail
  std::vector<uint64_t> gone;
  uint64_t serial;
  {
    std::lock_guard<std::mutex> lock(mu_);
    serial = next_serial_++;
    auto [it, fresh] = by_fd_.try_emplace(fd, Entry{serial, st.st_dev, st.st_ino, cred});
    if (!fresh) {  // the number was closed, so its connection is gone
      live_.erase(it->second.serial);
      if (!it->second.cred) gone.push_back(it->second.serial);
      it->second = Entry{serial, st.st_dev, st.st_ino, cred};
    }
    live_.insert(serial);
  }
  Report(gone);
  return serial;
}

bool PeerTable::IsFdPeer(absl::string_view peer) { return absl::StartsWith(peer, "fd:"); }

std::optional<PeerConnection> PeerTable::Find(absl::string_view peer) const {
  if (!IsFdPeer(peer)) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(peer.substr(3), &fd)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return PeerConnection{it->second.serial, it->second.cred};
}

bool PeerTable::Alive(uint64_t serial) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.count(serial) != 0;
}

size_t PeerTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_fd_.size();
}

void PeerTable::Report(const std::vector<uint64_t>& gone) const {
  if (!on_gone_) return;
  for (uint64_t s : gone) on_gone_(s);
}

int PeerTable::Sweep() {
  std::vector<uint64_t> gone;
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = by_fd_.begin(); it != by_fd_.end();) {
      struct stat st {};
      // Closed (EBADF), or the number now names another file: gRPC closed
      // the connection (socket inodes are not reused while either lives).
      if (fstat(it->first, &st) != 0 || st.st_ino != it->second.ino ||
          st.st_dev != it->second.dev) {
        live_.erase(it->second.serial);
        if (!it->second.cred) gone.push_back(it->second.serial);
        ++n;
        it = by_fd_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Report(gone);
  return n;
}

void PeerTable::StartSweeper(std::chrono::milliseconds every) {
  sweeper_ = std::thread([this, every] {
    std::unique_lock<std::mutex> lock(sweep_mu_);
    while (!sweep_stop_) {
      sweep_cv_.wait_for(lock, every);
      if (sweep_stop_) break;
      lock.unlock();
      Sweep();
      lock.lock();
    }
  });
}

void PeerTable::StopSweeper() {
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    sweep_stop_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

// ---- PeerListener -----------------------------------------------------------

namespace {

constexpr absl::string_view kUnix = "unix:";
constexpr absl::string_view kAbstract = "unix-abstract:";

// Splits "HOST:PORT" or "[V6]:PORT"; false unless PORT is a number that
// fits and HOST holds no further ':' outside brackets (a URI such as
// "ipv4:..." or "dns:///..." is gRPC's to serve).
bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string h = address.substr(0, colon);
  const std::string p = address.substr(colon + 1);
  if (p.empty() || p.size() > 5 || !std::all_of(p.begin(), p.end(), ::isdigit)) return false;
  const int n = std::atoi(p.c_str());
  if (n > 65535) return false;
  if (!h.empty() && h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
    in6_addr a{};
    if (inet_pton(AF_INET6, h.c_str(), &a) != 1) return false;
  } else if (h.find(':') != std::string::npos || h.find('/') != std::string::npos) {
    return false;
  }
  *host = h;
  *port = n;
  return true;
}

void SetPort(sockaddr_storage* ss, int port) {
  if (ss->ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(ss)->sin_port = htons(static_cast<uint16_t>(port));
  else
    reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = htons(static_cast<uint16_t>(port));
}

// Binds and listens on `ss`; the descriptor, or -1 with *errnum set.
int ListenOn(const sockaddr_storage& ss, socklen_t len, bool dual_stack, int* errnum) {
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *errnum = errno;
    return -1;
  }
  int one = 1, v6only = dual_stack ? 0 : 1;
  // As gRPC's own listener: SO_REUSEADDR (a restart binds through
  // TIME_WAIT), never SO_REUSEPORT (two daemons must not share a port).
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0 || listen(fd, 4096) != 0) {
    *errnum = errno;
    close(fd);
    return -1;
  }
  return fd;
}

int LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

}  // namespace

PeerListener::PeerListener(const std::string& address, PeerTable* table)
    : address_(address), table_(table) {
  unix_ = ServesUnix(address);
  abstract_ = absl::StartsWith(address, kAbstract);
  if (unix_) path_ = address.substr(abstract_ ? kAbstract.size() : kUnix.size());
}

bool PeerListener::ServesUnix(const std::string& address) {
  return absl::StartsWith(address, kUnix) || absl::StartsWith(address, kAbstract);
}

bool PeerListener::ServesTcp(const std::string& address) {
  std::string host;
  int port = 0;
  return !ServesUnix(address) && SplitHostPort(address, &host, &port);
}

std::string PeerListener::Bind() {
  std::string err = unix_ ? BindUnix() : BindTcp();
  if (err.empty() && pipe2(wake_, O_CLOEXEC) != 0)
    err = std::string("pipe: ") + std::strerror(errno);
  if (!err.empty()) CloseListeners();
  return err;
}

std::string PeerListener::BindUnix() {
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
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket(AF_UNIX): ") + std::strerror(errno);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(fd, 128) != 0) {
    std::string err = std::strerror(errno);
    close(fd);
    return err;
  }
  listen_fds_.push_back(fd);
  bound_ = address_;
  return "";
}

std::string PeerListener::BindTcp() {
  std::string host;
  int port = 0;
  if (!SplitHostPort(address_, &host, &port)) return "not a HOST:PORT address";
  // The sockets to bind, as gRPC binds them: a wildcard's one socket, or
  // each address a name resolves to, all on one port.
  struct Want {
    sockaddr_storage ss;
    socklen_t len;
    bool dual_stack;
  };
  std::vector<Want> want;
  // A wildcard is one dual-stack IPv6 socket (IPv4 too), or IPv4 alone
  // where the host has no IPv6: tried in that order, the first that binds
  // (a port in use fails the first, loudly).
  const bool wildcard = host.empty() || host == "0.0.0.0" || host == "::";
  if (wildcard) {
    Want v6{};
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&v6.ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_any;
    v6.len = sizeof(sockaddr_in6);
    v6.dual_stack = true;
    Want v4{};
    auto* a4 = reinterpret_cast<sockaddr_in*>(&v4.ss);
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    v4.len = sizeof(sockaddr_in);
    want = {v6, v4};
  } else {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if (int rc = getaddrinfo(host.c_str(), "0", &hints, &res); rc != 0)
      return "cannot resolve " + host + ": " + gai_strerror(rc);
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
      Want w{};
      std::memcpy(&w.ss, ai->ai_addr, ai->ai_addrlen);
      w.len = ai->ai_addrlen;
      w.dual_stack = false;
      const bool dup = std::any_of(want.begin(), want.end(), [&](const Want& o) {
        return o.len == w.len && std::memcmp(&o.ss, &w.ss, w.len) == 0;
      });
      if (!dup) want.push_back(w);
    }
    freeaddrinfo(res);
    if (want.empty()) return "cannot resolve " + host + " to an IPv4 or IPv6 address";
  }
  std::string first_err;
  for (Want& w : want) {
    SetPort(&w.ss, port);
    int errnum = 0;
    const int fd = ListenOn(w.ss, w.len, w.dual_stack, &errnum);
    if (fd < 0) {
      // A family this host lacks (localhost's ::1 without IPv6) is skipped,
      // as gRPC does, while another address binds; anything else (a port
      // in use) is the answer.
      if (errnum == EADDRNOTAVAIL || errnum == EAFNOSUPPORT) {
        if (first_err.empty()) first_err = std::strerror(errnum);
        continue;
      }
      CloseListeners();
      return std::strerror(errnum);
    }
    listen_fds_.push_back(fd);
    if (port == 0) port = LocalPort(fd);  // the other addresses take the same port
    if (wildcard) break;
  }
  if (listen_fds_.empty()) return first_err;
  bound_ = address_.substr(0, address_.rfind(':')) + ":" + std::to_string(port);
  return "";
}

void PeerListener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void PeerListener::AcceptLoop(grpc::Server* server) {
  std::vector<pollfd> fds;
  for (int fd : listen_fds_) fds.push_back({fd, POLLIN, 0});
  fds.push_back({wake_[0], POLLIN, 0});
  for (;;) {
    for (auto& p : fds) p.revents = 0;
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "kerneld: poll on %s: %s; no longer accepting there\n", address_.c_str(),
                   std::strerror(errno));
      return;
    }
    if (fds.back().revents != 0) return;  // Stop()
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      const int fd = accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        // EMFILE and friends: back off instead of spinning on a ready socket.
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) usleep(10000);
        continue;
      }
      std::optional<PeerCred> cred;
      if (unix_) {
        ucred uc{};
        socklen_t len = sizeof uc;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
          close(fd);  // a peer we cannot name is not served
          continue;
        }
        cred = PeerCred{uc.pid, uc.uid, uc.gid};
      } else {
        // What gRPC's own TCP listener sets: small answers leave at once.
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      // Recorded before gRPC sees the descriptor: its first call finds it.
      table_->Add(fd, cred);
      grpc::AddInsecureChannelFromFd(server, fd);  // gRPC owns fd from here
    }
  }
}

void PeerListener::CloseListeners() {
  for (int fd : listen_fds_) close(fd);
  if (!listen_fds_.empty() && unix_ && !abstract_) unlink(path_.c_str());
  listen_fds_.clear();
  for (int& fd : wake_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void PeerListener::Stop() {
  if (wake_[1] >= 0) {
    if (write(wake_[1], "x", 1) < 0) { /* the thread also stops when the pipe closes */
    }
  }
  if (thread_.joinable()) thread_.join();
  CloseListeners();
}

}  // namespace kerneld::server
