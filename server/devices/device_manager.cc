#include "devices/device_manager.h"

#include "devices/cpu_worker.h"

namespace kerneld::server {

DeviceManager::DeviceManager(const Config& cfg) {
  workers_.push_back(std::make_unique<CpuWorker>(cfg.cpu_workers, cfg.cpu_threads, cfg.queue_capacity));
  if (cfg.enable_cuda) {
    DiscoverCudaDevices(cfg, &workers_, &cuda_);
  } else {
    DiscoverCudaDevices(cfg, nullptr, &cuda_);  // versions only
    cuda_.status = "GPUs disabled by --enable_cuda=false";
  }
  for (auto& w : workers_) {
    w->set_spin(std::chrono::microseconds(cfg.worker_spin_us));
    w->set_adaptive_spin(std::chrono::microseconds(cfg.adaptive_spin_us));
    w->set_inline_max_bytes(cfg.inline_max_kb < 0 ? -1 : int64_t{cfg.inline_max_kb} << 10);
    w->set_inline_max_ns(int64_t{cfg.inline_max_us} * 1000);
    w->set_priority_aging(std::chrono::milliseconds(cfg.priority_aging_ms));
  }
}

DeviceManager::~DeviceManager() { StopAll(); }

void DeviceManager::StopAll() {
  for (auto& w : workers_) w->Stop();
}

std::vector<DeviceInfo> DeviceManager::Devices() const {
  std::vector<DeviceInfo> out;
  for (const auto& w : workers_) out.push_back(w->Snapshot());
  return out;
}

bool DeviceManager::has_cuda_device() const {
  for (const auto& w : workers_)
    if (w->info().device.is_cuda()) return true;
  return false;
}

DeviceWorker* DeviceManager::Find(const std::string& name, Status* error) const {
  std::string key = name;
  if (key.rfind("cuda:", 0) == 0 && key.size() > 5 && !std::isdigit(static_cast<unsigned char>(key[5])))
    key = key.substr(5);  // cuda:<uuid>
  for (const auto& w : workers_) {
    const DeviceInfo& d = w->info();
    if (key == d.device.ToString() || (!d.uuid.empty() && key == d.uuid)) return w.get();
  }
  std::string known;
  for (const auto& w : workers_) known += (known.empty() ? "" : ", ") + w->info().device.ToString();
  bool well_formed = key == "cpu" || name.rfind("cuda:", 0) == 0 || key.rfind("GPU-", 0) == 0;
  if (!well_formed) {
    *error = InvalidArgument("device " + Quote(name) + " is not a device name; use cpu, cuda:N or cuda:<uuid> (devices: " + known + ")");
  } else {
    *error = NotFound("device " + Quote(name) + " not found; this server has {" + known + "}" +
                      (cuda_.status.empty() ? "" : " (" + cuda_.status + ")"));
  }
  return nullptr;
}

}  // namespace kerneld::server
