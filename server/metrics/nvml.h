// NVML, loaded with dlopen at first use so the daemon runs where the
// library is missing (no driver, CPU-only hosts): then every query fails
// quietly and the utilization gauge is simply absent.
#pragma once

#include <optional>
#include <string>

namespace kerneld::server {

// GPU utilization in [0, 1] of the device with this UUID ("GPU-..."), or
// nullopt when NVML is unavailable or does not know the device.
std::optional<double> NvmlUtilization(const std::string& uuid);

}  // namespace kerneld::server
