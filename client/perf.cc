#include "perf.h"

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "client.h"

namespace kerneld::client {
namespace {

using Clock = std::chrono::steady_clock;

// ExecutionInfo fields kept per sample, ns: the three totals, then the
// stage timestamps (ns since arrival, 0 while the server does not fill them).
enum InfoField {
  kQueue,
  kExecute,
  kTotal,
  kDecoded,
  kScheduled,
  kDequeued,
  kLaunched,
  kKernelDone,
  kCompleted,
  kInfoFields
};
constexpr int kStages = 6;  // kDecoded .. kCompleted
constexpr const char* kStageNames[kStages] = {"decode", "schedule", "dequeue",
                                              "launch", "kernel",   "complete"};

struct Sample {
  int64_t latency_ns = 0;
  int code = 0;  // gRPC code; a stream request's own status counts too
  std::array<int64_t, kInfoFields> info{};
};

Sample MakeSample(Clock::time_point t0, int code, const v1::ExecutionInfo& i) {
  Sample s;
  s.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  s.code = code;
  s.info = {i.queue_ns(),    i.execute_ns(),  i.total_ns(),       i.decoded_ns(),  i.scheduled_ns(),
            i.dequeued_ns(), i.launched_ns(), i.kernel_done_ns(), i.completed_ns()};
  return s;
}

// Where one client (or the open-loop callbacks) leaves its samples. Each
// client has its own, so the lock is only contended at a window boundary.
struct Sink {
  std::mutex mu;
  std::vector<Sample> samples;
  int64_t completed = 0;  // every request answered, measured or not
  std::map<int, int64_t> codes;
  std::map<int, std::string> messages;  // the first message of each failing code

  void Add(const Sample& s, const std::string& message = "") {
    std::lock_guard<std::mutex> l(mu);
    samples.push_back(s);
    ++completed;
    if (s.code != 0) {
      ++codes[s.code];
      if (!messages.count(s.code)) messages[s.code] = message;
    }
  }
};

double CpuUs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

// Nearest-rank percentile of sorted values; 0 when empty.
double Pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// p50 of a server field over the samples that have it; -1 when none do.
double ServerP50(const std::vector<Sample>& samples, int from, int to) {
  std::vector<double> v;
  for (const auto& s : samples) {
    const int64_t b = s.info[static_cast<size_t>(to)];
    const int64_t a = from < 0 ? 0 : s.info[static_cast<size_t>(from)];
    if (s.code == 0 && b > 0 && (from < 0 || a > 0)) v.push_back(static_cast<double>(b - a) / 1e3);
  }
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : Pct(v, 0.5);
}

struct Window {
  std::vector<Sample> samples;
  double secs = 0, cpu_us = 0;
  int64_t ok = 0;
  double throughput = 0, p50_us = 0;
};

struct Level {
  std::string target_name, address;
  bool open_loop = false;
  double load = 0;  // clients, or requests/s
  int connections = 0;
  int windows = 0;
  bool stable = false;
  int64_t measured = 0, requests_total = 0, errors_total = 0, dropped = 0;
  std::map<int, int64_t> codes;
  double throughput = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, cpu_us_per_request = 0;
  double queue = -1, execute = -1, total = -1;
  std::array<double, kStages> stages{};
  bool unreachable = false;
  // Every request of a window failed: the level stopped there, with the
  // most frequent code and its message.
  bool failed = false;
  int failed_code = 0;
  std::string failed_message;
};

std::atomic<int> g_channel_id{0};

// A new connection: the local subchannel pool and a unique arg keep gRPC
// from sharing one TCP connection between channels with equal arguments.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& target, int max_mb,
                                          const std::string& lb_policy) {
  grpc::ChannelArguments a;
  if (!lb_policy.empty()) a.SetLoadBalancingPolicyName(lb_policy);
  a.SetMaxReceiveMessageSize(max_mb * 1024 * 1024);
  a.SetMaxSendMessageSize(max_mb * 1024 * 1024);
  a.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  a.SetInt("kerneld.perf_channel", g_channel_id++);
  std::string error;  // kernelctl checked its TLS files before perf starts
  if (auto ch = MakeChannel(target, a, DefaultSecurity(), &error)) return ch;
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), a);
}

std::string CodeName(int code) { return StatusName(code); }

// A failure the same request meets at any load: no point in another level.
bool FailsAtAnyLoad(int code) {
  switch (static_cast<grpc::StatusCode>(code)) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return true;
    default:
      return false;
  }
}

bool Agree(double a, double b, double c, double tol) {
  const double mean = (a + b + c) / 3;
  if (mean <= 0) return false;
  for (double v : {a, b, c})
    if (std::abs(v - mean) > tol * mean) return false;
  return true;
}

// Drives one level against one target. Closed loop: `load` client threads,
// each one request in flight (unary calls, or ping-pong on its own stream).
// Open loop: one dispatcher sending `load` requests/s with the async API.
class LevelRun {
 public:
  LevelRun(const PerfOptions& o, const v1::ExecuteRequest& req, std::string name,
           std::string address, bool open_loop, double load)
      : o_(o), req_(req) {
    r_.target_name = std::move(name);
    r_.address = std::move(address);
    r_.open_loop = open_loop;
    r_.load = load;
  }

  Level Run() {
    const int clients = r_.open_loop ? 1 : static_cast<int>(r_.load);
    const int nconn =
        o_.connections > 0 ? std::min(o_.connections, std::max(clients, 1)) : std::max(clients, 1);
    r_.connections = nconn;
    for (int i = 0; i < nconn; ++i)
      channels_.push_back(NewChannel(r_.address, o_.max_message_mb, o_.lb_policy));
    // Connect first: setup is not part of what we measure.
    for (auto& ch : channels_) {
      if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
        std::fprintf(stderr, "kernelctl perf: cannot connect to %s\n", r_.address.c_str());
        r_.unreachable = true;
        return r_;
      }
    }
    if (r_.open_loop) {
      sinks_.push_back(std::make_unique<Sink>());
      threads_.emplace_back([this] { OpenLoop(); });
    } else {
      for (int i = 0; i < clients; ++i) {
        sinks_.push_back(std::make_unique<Sink>());
        auto ch = channels_[static_cast<size_t>(i % nconn)];
        Sink* sink = sinks_.back().get();
        if (o_.mode == PerfMode::kStream)
          threads_.emplace_back([this, ch, sink] { StreamClient(ch, sink); });
        else
          threads_.emplace_back([this, ch, sink] { UnaryClient(ch, sink); });
      }
    }
    Measure();
    stop_ = true;
    for (auto& t : threads_) t.join();
    {
      std::unique_lock<std::mutex> l(inflight_mu_);
      inflight_cv_.wait(l, [this] { return inflight_ == 0; });
    }
    for (auto& s : sinks_) {
      r_.requests_total += s->completed;
      for (const auto& [code, n] : s->codes) r_.codes[code] += n, r_.errors_total += n;
    }
    r_.dropped = dropped_;
    return r_;
  }

 private:
  void UnaryClient(std::shared_ptr<grpc::Channel> ch, Sink* sink) {
    KernelClient c(ch, ClientOptions{o_.max_message_mb, std::chrono::milliseconds(60000)});
    v1::ExecuteResponse resp;
    while (!stop_) {
      const auto t0 = Clock::now();
      const grpc::Status st = c.Execute(req_, &resp);
      if (!st.ok()) resp.Clear();
      sink->Add(MakeSample(t0, st.error_code(), resp.info()), st.error_message());
    }
  }

  void StreamClient(std::shared_ptr<grpc::Channel> ch, Sink* sink) {
    KernelClient c(ch, ClientOptions{o_.max_message_mb, {}});
    v1::ExecuteResponse resp;
    while (!stop_) {
      auto s = c.OpenStream();
      bool broken = false;
      while (!stop_) {
        const auto t0 = Clock::now();
        if (!s->Send(req_) || !s->Receive(&resp)) {
          broken = true;
          break;
        }
        sink->Add(MakeSample(t0, resp.status().code(), resp.info()), resp.status().message());
      }
      const grpc::Status st = s->Finish();
      if (broken) {
        // The request in flight is lost with the stream: one error, then a
        // new stream after a pause so a dead server is not spun on.
        Sample e;
        e.code = st.ok() ? grpc::StatusCode::UNKNOWN : st.error_code();
        sink->Add(e, st.ok() ? "the stream ended early" : st.error_message());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  // One in-flight async call of the open loop.
  struct Call {
    grpc::ClientContext ctx;
    v1::ExecuteResponse resp;
    Clock::time_point scheduled;
  };

  void OpenLoop() {
    std::vector<std::unique_ptr<v1::KernelService::Stub>> stubs;
    for (auto& ch : channels_) stubs.push_back(v1::KernelService::NewStub(ch));
    const auto interval =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / r_.load));
    // A cap on calls in flight keeps an overloaded server from taking the
    // client's memory with it; what does not fit is counted as dropped.
    const int64_t cap = 10000;
    auto next = Clock::now();
    for (size_t i = 0; !stop_; ++i, next += interval) {
      std::this_thread::sleep_until(next);
      {
        std::lock_guard<std::mutex> l(inflight_mu_);
        if (inflight_ >= cap) {
          ++dropped_;
          continue;
        }
        ++inflight_;
      }
      auto* call = new Call;
      call->scheduled = next;
      call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      Sink* sink = sinks_[0].get();
      stubs[i % stubs.size()]->async()->Execute(
          &call->ctx, &req_, &call->resp, [this, call, sink](grpc::Status st) {
            if (!st.ok()) call->resp.Clear();
            sink->Add(MakeSample(call->scheduled, st.error_code(), call->resp.info()),
                      st.error_message());
            delete call;
            std::lock_guard<std::mutex> l(inflight_mu_);
            if (--inflight_ == 0) inflight_cv_.notify_all();
          });
    }
  }

  // Windows until the last three agree in throughput and p50, or the cap;
  // the result is those last three windows together.
  void Measure() {
    std::deque<Window> last;
    const bool tty = isatty(2);
    auto start = Clock::now();
    double cpu0 = CpuUs();
    for (int w = 1; w <= o_.max_windows; ++w) {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(o_.window_ms));
      Window win;
      for (auto& s : sinks_) {
        std::lock_guard<std::mutex> l(s->mu);
        win.samples.insert(win.samples.end(), s->samples.begin(), s->samples.end());
        s->samples.clear();
      }
      const auto end = Clock::now();
      const double cpu1 = CpuUs();
      win.secs = std::chrono::duration<double>(end - start).count();
      win.cpu_us = cpu1 - cpu0;
      start = end;
      cpu0 = cpu1;
      std::vector<double> lat;
      for (const auto& s : win.samples)
        if (s.code == 0) lat.push_back(static_cast<double>(s.latency_ns) / 1e3);
      std::sort(lat.begin(), lat.end());
      win.ok = static_cast<int64_t>(lat.size());
      win.throughput = static_cast<double>(win.ok) / win.secs;
      win.p50_us = Pct(lat, 0.5);
      std::fprintf(stderr, "%s[%s %s %s=%g] window %d/%d: %.0f req/s, p50 %.1f us%s",
                   tty ? "\r\033[K" : "", r_.target_name.c_str(),
                   o_.mode == PerfMode::kStream ? "stream" : "unary",
                   r_.open_loop ? "rate" : "clients", r_.load, w, o_.max_windows, win.throughput,
                   win.p50_us, tty ? "" : "\n");
      r_.windows = w;
      // A window in which every request failed: the level cannot measure
      // anything, and going on only repeats the failure (a missing attr
      // sent 326,572 failing requests over ten windows, and said nothing).
      if (win.ok == 0 && !win.samples.empty()) {
        std::map<int, int64_t> codes;
        for (const auto& s : win.samples) ++codes[s.code];
        const auto worst =
            std::max_element(codes.begin(), codes.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
        r_.failed = true;
        r_.failed_code = worst->first;
        for (auto& s : sinks_) {
          std::lock_guard<std::mutex> l(s->mu);
          if (auto it = s->messages.find(worst->first); it != s->messages.end()) {
            r_.failed_message = it->second;
            break;
          }
        }
        last.push_back(std::move(win));
        if (last.size() > 3) last.pop_front();
        break;
      }
      last.push_back(std::move(win));
      if (last.size() > 3) last.pop_front();
      if (last.size() == 3 &&
          Agree(last[0].throughput, last[1].throughput, last[2].throughput, o_.stability) &&
          Agree(last[0].p50_us, last[1].p50_us, last[2].p50_us, o_.stability)) {
        r_.stable = true;
        break;
      }
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    Summarize(last);
  }

  void Summarize(const std::deque<Window>& last) {
    std::vector<Sample> all;
    double secs = 0, cpu = 0;
    for (const auto& w : last) {
      all.insert(all.end(), w.samples.begin(), w.samples.end());
      secs += w.secs;
      cpu += w.cpu_us;
    }
    std::vector<double> lat;
    for (const auto& s : all)
      if (s.code == 0) lat.push_back(static_cast<double>(s.latency_ns) / 1e3);
    std::sort(lat.begin(), lat.end());
    r_.measured = static_cast<int64_t>(lat.size());
    r_.throughput = secs > 0 ? static_cast<double>(lat.size()) / secs : 0;
    r_.p50 = Pct(lat, 0.5);
    r_.p90 = Pct(lat, 0.9);
    r_.p99 = Pct(lat, 0.99);
    r_.p999 = Pct(lat, 0.999);
    r_.cpu_us_per_request = lat.empty() ? 0 : cpu / static_cast<double>(lat.size());
    r_.queue = ServerP50(all, -1, kQueue);
    r_.execute = ServerP50(all, -1, kExecute);
    r_.total = ServerP50(all, -1, kTotal);
    // Each stage's share: from the previous stage (arrival for the first).
    for (int i = 0; i < kStages; ++i)
      r_.stages[static_cast<size_t>(i)] =
          ServerP50(all, i == 0 ? -1 : kDecoded + i - 1, kDecoded + i);
  }

  const PerfOptions& o_;
  const v1::ExecuteRequest& req_;
  Level r_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex inflight_mu_;
  std::condition_variable inflight_cv_;
  int64_t inflight_ = 0, dropped_ = 0;
};

std::string Us(double v) {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string LevelName(const Level& l) {
  char buf[48];
  std::snprintf(buf, sizeof buf, l.open_loop ? "rate=%g" : "c=%g", l.load);
  return buf;
}

void PrintHeader() {
  std::printf("%-10s %-8s %10s %9s %9s %9s %9s %8s %7s %s\n", "level", "target", "req/s", "p50 us",
              "p90 us", "p99 us", "p99.9 us", "cpu us/r", "errors", "windows");
}

void PrintLevel(const Level& l) {
  std::string errs;
  for (const auto& [code, n] : l.codes) errs += " " + CodeName(code) + "=" + std::to_string(n);
  std::printf("%-10s %-8s %10.0f %9.1f %9.1f %9.1f %9.1f %8.1f %7lld %d%s%s\n",
              LevelName(l).c_str(), l.target_name.c_str(), l.throughput, l.p50, l.p90, l.p99,
              l.p999, l.cpu_us_per_request, static_cast<long long>(l.errors_total), l.windows,
              l.stable ? "" : " (unstable)", errs.c_str());
  if (l.dropped > 0)
    std::printf("%-10s %-8s %lld requests not sent: 10000 already in flight\n", "", "",
                static_cast<long long>(l.dropped));
}

// kerneld's own view, p50 in us: where the server spent the round trip.
void PrintServer(const Level& l) {
  std::printf("%-10s %-8s server p50 us: queue %s, execute %s, total %s; stages:", "", "",
              Us(l.queue).c_str(), Us(l.execute).c_str(), Us(l.total).c_str());
  for (int i = 0; i < kStages; ++i)
    std::printf(" %s %s", kStageNames[i], Us(l.stages[static_cast<size_t>(i)]).c_str());
  std::printf("\n");
}

// Why a level stopped early, on stderr beside the progress lines.
void ReportFailed(const Level& l) {
  if (!l.failed) return;
  std::fflush(stdout);
  std::fprintf(stderr,
               "kernelctl perf: [%s %s] every request of window %d failed, level stopped: %s: %s\n",
               l.target_name.c_str(), LevelName(l).c_str(), l.windows,
               CodeName(l.failed_code).c_str(), l.failed_message.c_str());
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

void PrintRatio(const Level& k, const Level& f) {
  std::printf("%-10s %-8s %9.2fx %8.2fx %18.2fx   (kerneld / floor)\n", "", "ratio",
              Ratio(k.throughput, f.throughput), Ratio(k.p50, f.p50), Ratio(k.p99, f.p99));
}

std::string JsonNum(double v) {
  if (v < 0) return "null";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string JsonStr(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// One JSON object on one line per level (inside a JSON array), so a test or
// a script can read it with a JSON parser or line by line.
std::string Json(const PerfOptions& o, const std::string& op, const Level& l, const Level* floor) {
  std::ostringstream j;
  j << "{\"target\":" << JsonStr(l.target_name) << ",\"address\":" << JsonStr(l.address)
    << ",\"op\":" << JsonStr(op) << ",\"mode\":\""
    << (o.mode == PerfMode::kStream ? "stream" : "unary") << "\""
    << ",\"concurrency\":" << (l.open_loop ? 0 : static_cast<int>(l.load))
    << ",\"request_rate\":" << (l.open_loop ? l.load : 0) << ",\"connections\":" << l.connections
    << ",\"window_ms\":" << o.window_ms << ",\"windows\":" << l.windows
    << ",\"stable\":" << (l.stable ? "true" : "false") << ",\"measured_requests\":" << l.measured
    << ",\"requests_total\":" << l.requests_total << ",\"errors_total\":" << l.errors_total
    << ",\"dropped\":" << l.dropped
    << ",\"stopped_on\":" << (l.failed ? JsonStr(CodeName(l.failed_code)) : "null")
    << ",\"errors\":{";
  bool first = true;
  for (const auto& [code, n] : l.codes) {
    j << (first ? "" : ",") << JsonStr(CodeName(code)) << ":" << n;
    first = false;
  }
  j << "},\"throughput\":" << JsonNum(l.throughput) << ",\"latency_us\":{\"p50\":" << JsonNum(l.p50)
    << ",\"p90\":" << JsonNum(l.p90) << ",\"p99\":" << JsonNum(l.p99)
    << ",\"p999\":" << JsonNum(l.p999)
    << "},\"client_cpu_us_per_request\":" << JsonNum(l.cpu_us_per_request)
    << ",\"server_p50_us\":{\"queue\":" << JsonNum(l.queue) << ",\"execute\":" << JsonNum(l.execute)
    << ",\"total\":" << JsonNum(l.total);
  for (int i = 0; i < kStages; ++i)
    j << ",\"" << kStageNames[i] << "\":" << JsonNum(l.stages[static_cast<size_t>(i)]);
  j << "}";
  if (floor != nullptr)
    j << ",\"ratio_to_floor\":{\"throughput\":" << JsonNum(Ratio(l.throughput, floor->throughput))
      << ",\"p50\":" << JsonNum(Ratio(l.p50, floor->p50))
      << ",\"p99\":" << JsonNum(Ratio(l.p99, floor->p99)) << "}";
  j << "}";
  return j.str();
}

}  // namespace

bool ParsePositiveList(const std::string& text, std::vector<double>* out) {
  out->clear();
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0)) return false;
    out->push_back(v);
  }
  return !out->empty();
}

int RunPerf(const PerfOptions& o, const v1::ExecuteRequest& req,
            const v1::ExecuteRequest* floor_req) {
  const bool open_loop = !o.request_rates.empty();
  std::vector<double> loads = o.request_rates;
  if (!open_loop)
    for (int c : o.concurrency) loads.push_back(c);
  std::printf(
      "%s %s, %s, %zu bytes per request; windows of %d ms, at most %d, stable when three "
      "agree within %.0f%%\n",
      req.op().c_str(), o.mode == PerfMode::kStream ? "stream ping-pong" : "unary",
      open_loop ? "open loop" : "closed loop", req.ByteSizeLong(), o.window_ms, o.max_windows,
      o.stability * 100);
  PrintHeader();
  std::vector<std::string> json;
  int rc = 0;
  for (double load : loads) {
    // kerneld then the floor, level by level, so both see the same
    // machine at nearly the same time.
    Level k = LevelRun(o, req, "kerneld", o.target, open_loop, load).Run();
    if (k.unreachable) return 1;
    PrintLevel(k);
    PrintServer(k);
    ReportFailed(k);
    std::unique_ptr<Level> f;
    if (!o.floor_target.empty()) {
      f = std::make_unique<Level>(
          LevelRun(o, floor_req ? *floor_req : req, "floor", o.floor_target, open_loop, load)
              .Run());
      if (f->unreachable) return 1;
      PrintLevel(*f);
      ReportFailed(*f);
      PrintRatio(k, *f);
    }
    std::fflush(stdout);
    json.push_back(Json(o, req.op(), k, f.get()));
    if (f) json.push_back(Json(o, req.op(), *f, nullptr));
    if (k.errors_total > 0 || (f && f->errors_total > 0)) rc = 1;
    if (k.failed && FailsAtAnyLoad(k.failed_code)) {
      std::fprintf(stderr, "kernelctl perf: %s fails at any load; no further levels\n",
                   CodeName(k.failed_code).c_str());
      break;
    }
  }
  if (!o.json_path.empty()) {
    FILE* fp = std::fopen(o.json_path.c_str(), "w");
    if (fp == nullptr) {
      std::fprintf(stderr, "kernelctl perf: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
    std::fprintf(fp, "[\n");
    for (size_t i = 0; i < json.size(); ++i)
      std::fprintf(fp, "%s%s\n", json[i].c_str(), i + 1 < json.size() ? "," : "");
    std::fprintf(fp, "]\n");
    std::fclose(fp);
  }
  return rc;
}

}  // namespace kerneld::client
