#include "metrics/metrics_http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <prometheus/text_serializer.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kerneld::server {

namespace {

constexpr uint64_t kListenId = 0, kStopId = 1;
using Clock = std::chrono::steady_clock;

// Splits "PORT", "HOST:PORT" or "[V6]:PORT" (civetweb's listening_ports
// forms that kerneld's flags and docs use).
bool SplitHostPort(const std::string& addr, std::string* host, std::string* port) {
  if (addr.empty()) return false;
  if (addr.front() == '[') {
    const size_t close = addr.find(']');
    if (close == std::string::npos || close + 1 >= addr.size() || addr[close + 1] != ':')
      return false;
    *host = addr.substr(1, close - 1);
    *port = addr.substr(close + 2);
  } else if (const size_t colon = addr.rfind(':'); colon == std::string::npos) {
    *host = "0.0.0.0";
    *port = addr;
  } else {
    *host = addr.substr(0, colon);
    *port = addr.substr(colon + 1);
    if (host->find(':') != std::string::npos) return false;  // a bare IPv6 address
  }
  if (host->empty() || *host == "*") *host = "0.0.0.0";
  if (port->empty() || port->size() > 5) return false;
  for (char ch : *port)
    if (ch < '0' || ch > '9') return false;
  return std::stoi(*port) <= 65535;
}

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body, bool head, const char* extra = "") {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + reason +
                  "\r\nContent-Type: " + content_type +
                  "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
                  "Connection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(Collect collect, Limits limits)
    : collect_(std::move(collect)),
      limits_(limits),
      registry_(std::make_shared<prometheus::Registry>()) {
  bytes_ = &prometheus::BuildCounter()
                .Name("exposer_transferred_bytes_total")
                .Help("Transferred bytes to metrics services")
                .Register(*registry_)
                .Add({});
  scrapes_ = &prometheus::BuildCounter()
                  .Name("exposer_scrapes_total")
                  .Help("Number of times metrics were scraped")
                  .Register(*registry_)
                  .Add({});
  latency_us_ =
      &prometheus::BuildSummary()
           .Name("exposer_request_latencies")
           .Help("Latencies of serving scrape requests, in microseconds")
           .Register(*registry_)
           .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}});
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

std::string MetricsHttpServer::Listen(const std::string& addr) {
  std::string host, port;
  if (!SplitHostPort(addr, &host, &port)) return "not HOST:PORT, [V6]:PORT or PORT";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return "cannot resolve " + host + ": " + gai_strerror(rc);
  std::string err = "no address";
  for (addrinfo* a = res; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // not REUSEPORT: one daemon a port
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      err = std::strerror(errno);
      close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0) return err;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || stop_fd_ < 0) {
    err = std::strerror(errno);
    Stop();
    return err;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kStopId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev);
  thread_ = std::thread([this] { Loop(); });
  return "";
}

void MetricsHttpServer::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  for (auto& c : conns_) close(c.fd);
  conns_.clear();
  by_id_.clear();
  for (int* fd : {&listen_fd_, &epoll_fd_, &stop_fd_})
    if (*fd >= 0) close(std::exchange(*fd, -1));
  port_ = 0;
}

void MetricsHttpServer::Loop() {
  epoll_event events[64];
  for (;;) {
    const int timeout_ms = ExpireAndNextTimeoutMs();
    const int n = epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kStopId) return;
      if (id == kListenId) {
        Accept();
        continue;
      }
      // A connection closed earlier in this batch is simply gone.
      if (auto it = by_id_.find(id); it != by_id_.end()) OnEvent(it->second, events[i].events);
    }
  }
}

void MetricsHttpServer::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && !conns_.empty()) {
        EvictOne();  // give the newcomer the oldest one's descriptor
        continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors with none of ours to give back: stop polling the
        // port for a moment instead of spinning on it.
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_ = true;
        accept_resume_ = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    if (static_cast<int>(conns_.size()) >= limits_.max_connections) EvictOne();
    Conn c;
    c.id = next_id_++;
    c.fd = fd;
    c.deadline = Clock::now() + limits_.read_timeout;
    conns_.push_back(std::move(c));
    auto it = std::prev(conns_.end());
    by_id_[it->id] = it;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = it->id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void MetricsHttpServer::EvictOne() {
  // The oldest connection not being answered (waiting for its request, or
  // answered and lingering); else the oldest.
  auto victim = std::find_if(conns_.begin(), conns_.end(),
                             [](const Conn& c) { return c.state != State::kWriting; });
  if (victim == conns_.end()) victim = conns_.begin();
  if (victim != conns_.end()) Close(victim);
}

void MetricsHttpServer::Close(ConnList::iterator c) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  by_id_.erase(c->id);
  conns_.erase(c);
}

void MetricsHttpServer::OnEvent(ConnList::iterator c, uint32_t events) {
  if (c->state == State::kWriting) {
    if (events & (EPOLLERR | EPOLLHUP)) return Close(c);
    return Flush(c);
  }
  // Reading the request, or lingering: reading what the client still sends
  // until it closes, so that closing never resets a response in flight.
  char buf[4096];
  for (;;) {
    const ssize_t n = read(c->fd, buf, sizeof buf);
    if (n == 0) return Close(c);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Close(c);
    }
    if (c->state == State::kLingering) continue;
    c->in.append(buf, static_cast<size_t>(n));
    if (c->in.find("\r\n\r\n") != std::string::npos || c->in.find("\n\n") != std::string::npos)
      return OnRequest(c);
    if (c->in.size() > limits_.max_request_bytes) {
      c->out = Response(431, "Request Header Fields Too Large", "text/plain", "request too large\n",
                        false);
      c->state = State::kWriting;
      c->deadline = Clock::now() + limits_.write_timeout;
      return Flush(c);
    }
  }
  if (events & (EPOLLERR | EPOLLHUP)) Close(c);
}

void MetricsHttpServer::OnRequest(ConnList::iterator c) {
  c->request_at = Clock::now();
  c->state = State::kWriting;
  c->deadline = c->request_at + limits_.write_timeout;
  const std::string line = c->in.substr(0, c->in.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    c->out = Response(400, "Bad Request", "text/plain", "bad request line\n", false);
    return Flush(c);
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    c->out = Response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false,
                      "Allow: GET, HEAD\r\n");
  } else if (path != "/metrics") {
    c->out = Response(404, "Not Found", "text/plain", "only /metrics is served here\n", head);
  } else {
    std::vector<prometheus::MetricFamily> families = collect_();
    for (auto& f : registry_->Collect()) families.push_back(std::move(f));
    c->out = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8",
                      prometheus::TextSerializer().Serialize(families), head);
    scrapes_->Increment();
  }
  c->in.clear();
  c->in.shrink_to_fit();
  Flush(c);
}

void MetricsHttpServer::Flush(ConnList::iterator c) {
  while (c->sent < c->out.size()) {
    const ssize_t n = send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        epoll_event ev{};
        ev.events = EPOLLOUT;
        ev.data.u64 = c->id;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
        return;
      }
      return Close(c);
    }
    c->sent += static_cast<size_t>(n);
  }
  bytes_->Increment(static_cast<double>(c->out.size()));
  if (c->request_at != Clock::time_point())
    latency_us_->Observe(
        std::chrono::duration<double, std::micro>(Clock::now() - c->request_at).count());
  // Done: half-close and read until the client closes (bounded by a short
  // deadline); the slot counts as waiting, so it is the first evicted.
  c->out.clear();
  c->out.shrink_to_fit();
  shutdown(c->fd, SHUT_WR);
  c->state = State::kLingering;
  c->deadline = Clock::now() + std::min(limits_.read_timeout, std::chrono::milliseconds(1000));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = c->id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

int MetricsHttpServer::ExpireAndNextTimeoutMs() {
  const auto now = Clock::now();
  if (accept_paused_ && now >= accept_resume_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    accept_paused_ = false;
  }
  auto next = now + std::chrono::seconds(10);
  if (accept_paused_) next = std::min(next, accept_resume_);
  for (auto it = conns_.begin(); it != conns_.end();) {
    auto cur = it++;
    if (cur->deadline <= now)
      Close(cur);
    else
      next = std::min(next, cur->deadline);
  }
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next - now).count());
}

}  // namespace kerneld::server
