#include "lane_perf.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "client.h"
#include "kerneld/percentile.h"
#include "lane_client.h"

namespace kerneld::client {

namespace {

struct Result {
  std::vector<double> lat_us;
  double seconds = 0;
  bool failed = false;
  std::string error;
};

// `clients` threads, each with a transport of its own, one request in
// flight each, for window_ms.
template <typename MakeCall>
Result Measure(int clients, int window_ms, MakeCall make_call) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mu;
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  const auto window = std::chrono::milliseconds(window_ms);
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto call = make_call();  // a callable returning grpc::Status
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const auto end = std::chrono::steady_clock::now() + window;
      while (std::chrono::steady_clock::now() < end) {
        const auto t0 = std::chrono::steady_clock::now();
        const grpc::Status st = call();
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!failed.exchange(true)) error = st.error_message();
          return;
        }
        lat[static_cast<size_t>(i)].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
    });
  }
  while (ready.load() < clients) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& t : threads) t.join();
  Result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& l : lat) r.lat_us.insert(r.lat_us.end(), l.begin(), l.end());
  r.failed = failed.load();
  r.error = error;
  return r;
}

void Print(const char* name, int clients, const Result& r) {
  std::printf("%-5s clients %3d: p50 %8.1f us  p99 %8.1f us  %10.0f req/s  (n=%zu)\n", name,
              clients, Percentile(r.lat_us, 0.5), Percentile(r.lat_us, 0.99),
              static_cast<double>(r.lat_us.size()) / r.seconds, r.lat_us.size());
}

}  // namespace

int RunLanePerf(const LanePerfOptions& o, const v1::ExecuteRequest& req) {
  std::string bytes;
  req.SerializeToString(&bytes);
  int rc = 0;
  for (int clients : o.concurrency) {
    std::atomic<bool> refused{false};
    grpc::Status why;
    std::mutex why_mu;
    Result lane = Measure(clients, o.window_ms, [&] {
      grpc::Status st;
      std::shared_ptr<LaneClient> c = LaneClient::Connect(o.lane_path, o.token, &st);
      if (!c) {
        std::lock_guard<std::mutex> lock(why_mu);
        refused.store(true);
        why = st;
      }
      return [c, &bytes]() -> grpc::Status {
        if (!c) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no lane");
        std::string out;
        return c->ExecuteBytes(bytes, &out);
      };
    });
    if (refused.load()) {
      std::fprintf(stderr, "kernelctl: no lane at %s: %s\n", o.lane_path.c_str(),
                   why.error_message().c_str());
      return 1;
    }
    if (lane.failed) {
      std::fprintf(stderr, "kernelctl: a lane request failed: %s\n", lane.error.c_str());
      rc = 1;
    }
    Print("lane", clients, lane);
    if (o.grpc_target.empty()) continue;
    Result grpc_r = Measure(clients, o.window_ms, [&] {
      auto c = std::make_shared<KernelClient>(o.grpc_target,
                                              ClientOptions{256, std::chrono::milliseconds(60000)});
      return [c, &req]() {
        v1::ExecuteResponse resp;
        return c->Execute(req, &resp);
      };
    });
    if (grpc_r.failed) {
      std::fprintf(stderr, "kernelctl: a gRPC request failed: %s\n", grpc_r.error.c_str());
      rc = 1;
    }
    Print("grpc", clients, grpc_r);
    if (!lane.lat_us.empty() && !grpc_r.lat_us.empty())
      std::printf("lane/grpc  clients %3d: p50 %.3fx  throughput %.2fx\n", clients,
                  Percentile(lane.lat_us, 0.5) / Percentile(grpc_r.lat_us, 0.5),
                  (static_cast<double>(lane.lat_us.size()) / lane.seconds) /
                      (static_cast<double>(grpc_r.lat_us.size()) / grpc_r.seconds));
  }
  return rc;
}

}  // namespace kerneld::client
