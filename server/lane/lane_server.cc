#include "lane/lane_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "metrics/daemon_log.h"
#include "metrics/lane_metrics.h"

namespace kerneld::server {

LaneServer::LaneServer(const Config& cfg, RequestRunner& runner, const Authenticator* auth)
    : cfg_(cfg), runner_(runner), auth_(auth), path_(cfg.lane_socket) {}

std::string LaneServer::Bind() {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof sa.sun_path)
    return "--lane_socket must be a path shorter than " + std::to_string(sizeof sa.sun_path) +
           " bytes";
  std::memcpy(sa.sun_path, path_.data(), path_.size());
  struct stat st {};
  // A socket file left by a daemon that died is replaced; anything else at
  // the path is not ours to remove.
  if (lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return path_ + " exists and is not a socket";
    unlink(path_.c_str());
  }
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return std::strerror(errno);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(listen_fd_, 128) != 0) {
    const std::string err = std::strerror(errno);
    close(listen_fd_);
    listen_fd_ = -1;
    return err;
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return std::strerror(errno);
  return "";
}

void LaneServer::Start() {
  thread_ = std::thread([this] { AcceptLoop(); });
}

size_t LaneServer::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lanes_.size();
}

void LaneServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    const int nfds = listen_fd_ >= 0 ? 2 : 1;
    if (poll(p, static_cast<nfds_t>(nfds), -1) < 0 && errno != EINTR) break;
    if (p[0].revents != 0) {
      uint64_t v;
      (void)read(wake_fd_, &v, sizeof v);
    }
    Reap();
    if (nfds == 2 && (p[1].revents & POLLIN) != 0) Accept();
  }
}

void LaneServer::Accept() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  ucred cred{};
  socklen_t len = sizeof cred;
  auto refuse = [&](StatusCode code, const std::string& why) {
    LaneStats::Global().refused.fetch_add(1);
    lane::Welcome w;
    w.code = static_cast<int32_t>(code);
    w.message_bytes = static_cast<uint32_t>(std::min<size_t>(why.size(), lane::kMaxMessageBytes));
    std::memcpy(w.message, why.data(), w.message_bytes);
    (void)send(fd, &w, sizeof w, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  };
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    refuse(StatusCode::kInternal, "cannot read the connection's credentials");
    return;
  }
  if (draining_.load()) {
    refuse(StatusCode::kUnavailable, "kerneld is draining; connect to another instance");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (lanes_.size() >= static_cast<size_t>(cfg_.max_lanes)) {
    refuse(StatusCode::kResourceExhausted, "this kerneld has " + std::to_string(lanes_.size()) +
                                               " lanes open (--max_lanes); close one or use gRPC");
    return;
  }
  if (cfg_.quota_lanes > 0 && lanes_by_uid_[cred.uid] >= cfg_.quota_lanes) {
    refuse(StatusCode::kResourceExhausted,
           "uid " + std::to_string(cred.uid) + " has " + std::to_string(cfg_.quota_lanes) +
               " lanes open (--quota_lanes); close one or use gRPC");
    return;
  }
  LaneOptions opt;
  opt.slots = static_cast<uint32_t>(cfg_.lane_slots);
  opt.slot_bytes = static_cast<uint64_t>(cfg_.lane_slot_kb) << 10;
  opt.spin_ns = static_cast<int64_t>(cfg_.lane_spin_us) * 1000;
  auto l = std::make_shared<Lane>(fd, PeerCred{cred.pid, cred.uid, cred.gid}, runner_, auth_, opt);
  const uint64_t id = next_id_++;
  Entry& e = lanes_[id];
  e.lane = l;
  e.uid = cred.uid;
  ++lanes_by_uid_[cred.uid];
  e.thread = std::thread([this, l, id] {
    l->Run();
    std::lock_guard<std::mutex> ended_lock(mu_);
    ended_.push_back(id);
    const uint64_t one = 1;
    (void)write(wake_fd_, &one, sizeof one);
  });
}

void LaneServer::Reap() {
  std::vector<Entry> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id : ended_) {
      auto it = lanes_.find(id);
      if (it == lanes_.end()) continue;
      if (--lanes_by_uid_[it->second.uid] <= 0) lanes_by_uid_.erase(it->second.uid);
      done.push_back(std::move(it->second));
      lanes_.erase(it);
    }
    ended_.clear();
  }
  // Outside the lock: the threads take it to report their end.
  for (Entry& e : done) e.thread.join();
}

void LaneServer::BeginDrain() {
  draining_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [_, e] : lanes_) e.lane->Close();
}

void LaneServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  std::map<uint64_t, Entry> lanes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lanes.swap(lanes_);
    ended_.clear();
  }
  for (auto& [_, e] : lanes) e.lane->Stop();
  for (auto& [_, e] : lanes)
    if (e.thread.joinable()) e.thread.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
    listen_fd_ = -1;
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

}  // namespace kerneld::server
