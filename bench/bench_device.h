// The kerneld DeviceInfo of a CUDA device, as the benchmarks that plan
// kernels (kernel_bench, jit_bench) describe it to the ops' plans.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kerneld/tensor.h"

namespace kerneld::bench {

inline DeviceInfo DescribeCudaDevice(int ordinal, const cudaDeviceProp& prop) {
  DeviceInfo dev;
  dev.device = Device::Cuda(ordinal);
  dev.name = prop.name;
  dev.compute_capability = prop.major * 10 + prop.minor;
  dev.sm_count = prop.multiProcessorCount;
  dev.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  dev.l2_bytes = prop.l2CacheSize;
  return dev;
}

}  // namespace kerneld::bench
