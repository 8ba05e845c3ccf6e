// The /metrics HTTP endpoint (--metrics_listen): one thread, epoll, no
// thread or slot that a client can hold.
//
// prometheus-cpp's exposer (civetweb) gave each connection a thread until its
// request arrived: 8 idle or half-sent connections held all 8 threads, and 40
// of them failed every scrape for a minute. Here a connection costs a few
// hundred bytes and a file descriptor until its deadline: the request must
// arrive within read_timeout of the accept, the response be taken within
// write_timeout. At most max_connections are open; a new one evicts the
// oldest still waiting for its request, so a scraper, which sends its request
// at once, is answered however many connections others hold.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kerneld::server {

struct MetricsHttpLimits {
  int max_connections = 64;
  std::chrono::milliseconds read_timeout{2000};    // accept to the end of the request head
  std::chrono::milliseconds write_timeout{10000};  // request to the last byte taken
  size_t max_request_bytes = 8192;                 // request line + headers
};

class MetricsHttpServer {
 public:
  using Limits = MetricsHttpLimits;
  // Families to expose, read at every scrape (on the server's thread).
  using Collect = std::function<std::vector<prometheus::MetricFamily>()>;

  explicit MetricsHttpServer(Collect collect, Limits limits = Limits());
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds addr ("PORT", "HOST:PORT", "[V6]:PORT"; port 0 picks a free one)
  // and starts serving; "" or why not.
  std::string Listen(const std::string& addr);
  int port() const { return port_; }
  // Closes the port and every connection at once. Idempotent.
  void Stop();

 private:
  enum class State { kReading, kWriting, kLingering };
  struct Conn {
    uint64_t id;
    int fd;
    State state = State::kReading;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point request_at;
    std::string in, out;
    size_t sent = 0;
  };
  using ConnList = std::list<Conn>;

  void Loop();
  void Accept();
  void OnEvent(ConnList::iterator c, uint32_t events);
  void OnRequest(ConnList::iterator c);
  void Flush(ConnList::iterator c);
  void Close(ConnList::iterator c);
  void EvictOne();
  int ExpireAndNextTimeoutMs();

  Collect collect_;
  Limits limits_;
  int listen_fd_ = -1, epoll_fd_ = -1, stop_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  bool accept_paused_ = false;
  std::chrono::steady_clock::time_point accept_resume_;
  uint64_t next_id_ = 2;  // 0: the listening socket, 1: the stop event
  ConnList conns_;        // oldest first
  std::unordered_map<uint64_t, ConnList::iterator> by_id_;

  // prometheus-cpp's exposer exported these; their names are kept.
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* bytes_ = nullptr;
  prometheus::Counter* scrapes_ = nullptr;
  prometheus::Summary* latency_us_ = nullptr;
};

}  // namespace kerneld::server
