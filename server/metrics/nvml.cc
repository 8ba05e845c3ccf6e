#include "metrics/nvml.h"

#include <dlfcn.h>

#include <mutex>

namespace kerneld::server {

namespace {

// The few NVML entry points we use, with their C ABI (nvml.h is not needed).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

struct Nvml {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  bool ok = false;
};

const Nvml& Lib() {
  static Nvml nvml = [] {
    Nvml n;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return n;
    n.init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(h, "nvmlInit_v2"));
    n.by_uuid = reinterpret_cast<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(dlsym(h, "nvmlDeviceGetHandleByUUID"));
    n.utilization =
        reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*)>(dlsym(h, "nvmlDeviceGetUtilizationRates"));
    n.ok = n.init && n.by_uuid && n.utilization && n.init() == 0;
    return n;
  }();
  return nvml;
}

}  // namespace

std::optional<double> NvmlUtilization(const std::string& uuid) {
  const Nvml& n = Lib();
  if (!n.ok) return std::nullopt;
  nvmlDevice_t dev = nullptr;
  if (n.by_uuid(uuid.c_str(), &dev) != 0) return std::nullopt;
  nvmlUtilization_t u{};
  if (n.utilization(dev, &u) != 0) return std::nullopt;
  return u.gpu / 100.0;
}

}  // namespace kerneld::server
