// GPU discovery (CUDA builds). Without a driver or a device the daemon keeps
// serving from the CPU; GetServerInfo says why no GPU is used.
#include <cuda_runtime.h>

#include <cstdio>

#include "devices/cuda_worker.h"
#include "devices/device_manager.h"

namespace kerneld::server {

namespace {
std::string UuidString(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}
}  // namespace

void DiscoverCudaDevices(const Config& cfg, std::vector<std::unique_ptr<DeviceWorker>>* out,
                         CudaVersions* v) {
  cudaRuntimeGetVersion(&v->runtime);
  if (cudaDriverGetVersion(&v->driver) != cudaSuccess) v->driver = 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    v->status =
        v->driver == 0
            ? std::string(
                  "no NVIDIA driver found (libcuda.so.1 is not loadable); serving from the CPU")
            : std::string("no usable GPU: cudaGetDeviceCount: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return;
  }
  if (n == 0) {
    v->status = "no CUDA device present";
    return;
  }
  if (out == nullptr) return;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.device = Device::Cuda(i);
    d.uuid = UuidString(p.uuid);
    d.name = p.name;
    d.compute_capability = p.major * 10 + p.minor;
    d.sm_count = p.multiProcessorCount;
    d.total_memory = static_cast<int64_t>(p.totalGlobalMem);
    d.l2_bytes = p.l2CacheSize;
    out->push_back(std::make_unique<CudaWorker>(d, cfg.cuda_streams, cfg.queue_capacity,
                                                cfg.gpu_timing == "events"));
  }
}

}  // namespace kerneld::server
