#include "metrics/metrics.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "auth/principal_stats.h"
#include "buffers/buffer_registry.h"
#include "buffers/buffer_sources.h"
#include "build_info.h"
#include "devices/device_manager.h"
#include "graph/graph_metrics.h"
#include "metrics/jit_metrics.h"
#include "metrics/lane_metrics.h"
#include "metrics/nvml.h"
#include "metrics/one_family.h"
#include "metrics/process_metrics.h"
#include "metrics/sandbox_metrics.h"
#include "scheduler/tuning_metrics.h"

namespace kerneld::server {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

ClientMetric Value(std::vector<ClientMetric::Label> labels, double v, bool counter) {
  ClientMetric m;
  m.label = std::move(labels);
  if (counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return m;
}

// Host memory for the "cpu" device: MemTotal and MemTotal - MemAvailable.
bool HostMemory(uint64_t* used, uint64_t* total) {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t v = 0, t = 0, a = 0;
  std::string unit;
  while (f >> key >> v >> unit) {
    if (key == "MemTotal:") t = v * 1024;
    if (key == "MemAvailable:") a = v * 1024;
  }
  if (t == 0) return false;
  *total = t;
  *used = t - a;
  return true;
}

}  // namespace

Metrics::Series::~Series() {
  for (auto& p : request_by_code) delete p.load();
}

Metrics::Metrics() = default;

Metrics::~Metrics() {
  Stop();  // stop scraping before the series go away
}

std::string Metrics::Listen(const std::string& addr) {
  server_ = std::make_unique<MetricsHttpServer>([this] { return Collect(); });
  if (std::string err = server_->Listen(addr); !err.empty()) {
    server_.reset();
    return "cannot serve metrics on " + addr + ": " + err +
           " (is another kerneld running? use --metrics_listen=HOST:PORT or 'off')";
  }
  return "";
}

void Metrics::Stop() { server_.reset(); }

int Metrics::port() const { return server_ ? server_->port() : 0; }

void Metrics::SetSources(const DeviceManager* devices, const BufferRegistry* buffers) {
  std::unique_lock lock(mu_);
  devices_ = devices;
  buffers_ = buffers;
}

Metrics::Series* Metrics::For(const std::string& op, const std::string& backend,
                              const std::string& device, Transport transport) {
  std::string key = op + '\0' + backend + '\0' + device + '\0' + TransportName(transport);
  {
    std::shared_lock lock(mu_);
    auto it = series_.find(key);
    if (it != series_.end()) return it->second.get();
  }
  std::unique_lock lock(mu_);
  auto& slot = series_[key];
  if (!slot) {
    slot = std::make_unique<Series>();
    slot->op = op;
    slot->backend = backend;
    slot->device = device;
    slot->transport = transport;
  }
  return slot.get();
}

uint64_t Metrics::RequestsAnswered() const {
  uint64_t n = 0;
  std::shared_lock lock(mu_);
  for (const auto& [key, s] : series_)
    for (const auto& slot : s->request_by_code)
      if (const AtomicHistogram* h = slot.load(std::memory_order_acquire)) n += h->Read().count;
  return n;
}

void Metrics::ObserveRequest(Series* s, StatusCode code, double seconds) {
  auto& slot = s->request_by_code[static_cast<size_t>(code) % 17];
  AtomicHistogram* h = slot.load(std::memory_order_acquire);
  if (h == nullptr) {
    auto* fresh = new AtomicHistogram();
    if (slot.compare_exchange_strong(h, fresh, std::memory_order_acq_rel)) {
      h = fresh;
    } else {
      delete fresh;  // another thread won; h holds its histogram
    }
  }
  h->Observe(seconds);
}

Metrics::OpTotals Metrics::Totals(const std::string& op) const {
  OpTotals t;
  std::shared_lock lock(mu_);
  for (const auto& [key, s] : series_) {
    if (s->op != op) continue;
    for (size_t c = 0; c < s->request_by_code.size(); ++c) {
      const AtomicHistogram* h = s->request_by_code[c].load(std::memory_order_acquire);
      if (h == nullptr) continue;
      const auto snap = h->Read();
      (c == 0 ? t.ok : t.failed) += snap.count;
      (c == 0 ? t.ok_s : t.failed_s) += snap.sum;
    }
    if (!s->executed.load(std::memory_order_relaxed)) continue;
    const auto q = s->queue.Read(), e = s->execute.Read();
    t.executed += e.count;
    t.queue_s += q.sum;
    t.execute_s += e.sum;
  }
  return t;
}

void Metrics::ObserveQueueAndExecute(Series* s, double queue_s, double execute_s) {
  s->queue.Observe(queue_s);
  s->execute.Observe(execute_s);
  s->executed.store(true, std::memory_order_relaxed);
}

std::vector<MetricFamily> Metrics::Collect() const {
  std::vector<MetricFamily> out;
  auto req =
      Family("kerneld_request_duration_seconds",
             "Time from a request's arrival to its response, by op, backend, device, gRPC code "
             "and transport.",
             MetricType::Histogram);
  auto total = Family("kerneld_requests_total",
                      "Requests answered, by op, backend, device, gRPC code and transport.",
                      MetricType::Counter);
  auto queue = Family("kerneld_queue_duration_seconds",
                      "Time from arrival to the start of execution.", MetricType::Histogram);
  auto exec =
      Family("kerneld_execute_duration_seconds",
             "Execution time of the implementation (CUDA events on GPUs).", MetricType::Histogram);
  // Held for the whole scrape: SetSources(nullptr, nullptr) at shutdown
  // waits for a scrape in progress to finish with the devices and buffers.
  std::shared_lock lock(mu_);
  const DeviceManager* devices = devices_;
  const BufferRegistry* buffers = buffers_;
  {
    for (const auto& [_, s] : series_) {
      for (size_t c = 0; c < s->request_by_code.size(); ++c) {
        const AtomicHistogram* h = s->request_by_code[c].load(std::memory_order_acquire);
        if (h == nullptr) continue;
        std::vector<ClientMetric::Label> labels = {
            {"op", s->op},
            {"backend", s->backend},
            {"device", s->device},
            {"code", std::string(StatusCodeName(static_cast<StatusCode>(c)))},
            {"transport", TransportName(s->transport)}};
        auto snap = h->Read();
        req.metric.push_back(HistogramMetric(labels, snap));
        total.metric.push_back(Value(labels, static_cast<double>(snap.count), true));
      }
      if (s->executed.load(std::memory_order_relaxed)) {
        std::vector<ClientMetric::Label> labels = {{"op", s->op},
                                                   {"backend", s->backend},
                                                   {"device", s->device},
                                                   {"transport", TransportName(s->transport)}};
        queue.metric.push_back(HistogramMetric(labels, s->queue.Read()));
        exec.metric.push_back(HistogramMetric(labels, s->execute.Read()));
      }
    }
  }
  out.push_back(std::move(req));
  out.push_back(std::move(total));
  out.push_back(std::move(queue));
  out.push_back(std::move(exec));

  auto xfer =
      Family("kerneld_transferred_bytes_total",
             "Tensor bytes moved by requests: in (inputs) and out (outputs), inline in messages or "
             "through registered buffers.",
             MetricType::Counter);
  const char* dirs[] = {"in", "in", "out", "out"};
  const char* paths[] = {"inline", "buffer", "inline", "buffer"};
  for (size_t i = 0; i < 4; ++i)
    xfer.metric.push_back(
        Value({{"direction", dirs[i]}, {"path", paths[i]}},
              static_cast<double>(transferred_[i].load(std::memory_order_relaxed)), true));
  out.push_back(std::move(xfer));

  if (devices != nullptr) {
    auto inflight = Family("kerneld_inflight_requests", "Requests executing on the device now.",
                           MetricType::Gauge);
    auto depth =
        Family("kerneld_queue_depth", "Requests waiting in the device's queue.", MetricType::Gauge);
    auto healthy =
        Family("kerneld_device_healthy",
               "1 while the device serves; 0 after a sticky device error.", MetricType::Gauge);
    auto mem = Family("kerneld_device_memory_bytes",
                      "Device memory, used and total (host memory for cpu).", MetricType::Gauge);
    auto util = Family("kerneld_device_utilization_ratio",
                       "GPU utilization over NVML's last sample period (0-1).", MetricType::Gauge);
    for (const auto& w : devices->workers()) {
      const DeviceInfo& d = w->info();
      const std::string label = DeviceManager::Label(d);
      inflight.metric.push_back(Value({{"device", label}}, w->inflight(), false));
      depth.metric.push_back(Value({{"device", label}}, w->queue_depth(), false));
      healthy.metric.push_back(Value({{"device", label}}, w->healthy() ? 1 : 0, false));
      uint64_t used = 0, tot = 0, free_b = 0;
      bool have = false;
      if (d.device.is_cpu()) {
        have = HostMemory(&used, &tot);
      } else if (w->healthy() && CudaMemInfo(d.device.index, &free_b, &tot)) {
        used = tot - free_b;
        have = true;
      }
      if (have) {
        mem.metric.push_back(
            Value({{"device", label}, {"state", "used"}}, static_cast<double>(used), false));
        mem.metric.push_back(
            Value({{"device", label}, {"state", "total"}}, static_cast<double>(tot), false));
      }
      if (d.device.is_cuda())
        if (auto u = NvmlUtilization(d.uuid))
          util.metric.push_back(Value({{"device", label}}, *u, false));
    }
    out.push_back(std::move(inflight));
    out.push_back(std::move(depth));
    out.push_back(std::move(healthy));
    out.push_back(std::move(mem));
    if (!util.metric.empty()) out.push_back(std::move(util));
  }

  if (buffers != nullptr) {
    auto count = Family("kerneld_buffers", "Registered buffers, by kind.", MetricType::Gauge);
    auto bytes = Family("kerneld_buffer_bytes", "Bytes in registered buffers, by kind and device.",
                        MetricType::Gauge);
    std::map<std::string, int> n = {{"cuda_ipc", 0}, {"server_allocated", 0}, {"shared_memory", 0}};
    std::map<std::pair<std::string, std::string>, double> b;
    for (const auto& r : buffers->ListAll()) {
      std::string kind(BufferKindName(r->kind));
      ++n[kind];
      b[{kind, r->device.is_cpu() ? "cpu" : r->device_uuid}] += static_cast<double>(r->size);
    }
    for (const auto& [kind, c] : n) count.metric.push_back(Value({{"kind", kind}}, c, false));
    for (const auto& [k, v] : b)
      bytes.metric.push_back(Value({{"kind", k.first}, {"device", k.second}}, v, false));
    out.push_back(std::move(count));
    out.push_back(std::move(bytes));
  }

  auto build =
      Family("kerneld_build_info", "Always 1; labels say what is running.", MetricType::Gauge);
  build.metric.push_back(Value({{"version", kKerneldVersion},
                                {"revision", kKerneldGitRevision},
                                {"cuda", std::string(kKerneldCudaBuild) == "ON" ? "yes" : "no"}},
                               1, false));
  out.push_back(std::move(build));
  // Per-principal use without principal labels (auth/principal_stats.h).
  for (auto& f : PrincipalStats::Global().Collect(buffers)) out.push_back(std::move(f));
  for (auto& f : ProcessFamilies()) out.push_back(std::move(f));
  for (auto& f : JitFamilies()) out.push_back(std::move(f));    // metrics/jit_metrics.h
  for (auto& f : GraphFamilies()) out.push_back(std::move(f));  // graph/graph_metrics.h
  for (auto& f : LaneFamilies()) out.push_back(std::move(f));   // metrics/lane_metrics.h
  for (auto& f : SandboxFamilies()) out.push_back(std::move(f));  // metrics/sandbox_metrics.h
  for (auto& f : TuningFamilies()) out.push_back(std::move(f));  // scheduler/tuning_metrics.h
  return out;
}

}  // namespace kerneld::server
