// Device discovery and the per-device workers. The CPU is always device 0 of
// the list; GPUs follow in CUDA ordinal order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "devices/worker.h"

namespace kerneld::server {

struct CudaVersions {
  int runtime = 0;  // cudaRuntimeGetVersion; 0 without CUDA support
  int driver = 0;   // cudaDriverGetVersion; 0 without a driver
  std::string status;  // why no GPU is used ("" when at least one is)
};

class DeviceManager {
 public:
  explicit DeviceManager(const Config& cfg);
  ~DeviceManager();

  const std::vector<std::unique_ptr<DeviceWorker>>& workers() const { return workers_; }
  std::vector<DeviceInfo> Devices() const;
  const CudaVersions& cuda() const { return cuda_; }
  bool has_cuda_device() const;

  // Resolves "cpu", "cuda:0", "cuda:<uuid>" or a bare "GPU-..." uuid.
  // Returns nullptr and sets *error (a status) when it names no device.
  DeviceWorker* Find(const std::string& name, Status* error) const;
  // "cpu" for the CPU, the UUID for a GPU: the metrics label.
  static std::string Label(const DeviceInfo& d) { return d.device.is_cpu() ? "cpu" : d.uuid; }

  void StopAll();

 private:
  std::vector<std::unique_ptr<DeviceWorker>> workers_;
  CudaVersions cuda_;
};

// Implemented in cuda_devices.cc (CUDA builds) or no_cuda.cc.
// Appends one worker per usable GPU and fills versions/status.
void DiscoverCudaDevices(const Config& cfg, std::vector<std::unique_ptr<DeviceWorker>>* out,
                         CudaVersions* versions);

}  // namespace kerneld::server
