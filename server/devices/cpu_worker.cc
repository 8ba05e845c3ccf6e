#include "devices/cpu_worker.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

namespace kerneld::server {

DeviceInfo CpuDeviceInfo() {
  DeviceInfo d;
  d.device = Device::Cpu();
  d.uuid = "cpu";
  d.name = "cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) d.name = line.substr(colon + 2);
      break;
    }
  }
  d.sm_count = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  d.total_memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  return d;
}

CpuWorker::CpuWorker(int workers, int threads, int capacity)
    : DeviceWorker(CpuDeviceInfo(), workers, capacity),
      pool_(std::make_unique<ThreadPool>(threads)) {
  Start();
}

Status CpuWorker::Execute(Task& task, TaskTiming* timing) {
  for (const auto& t : task.inputs)
    if (!t.device.is_cpu()) return Internal("cpu worker got a tensor on " + t.device.ToString());
  KernelContext ctx;
  ctx.op = task.op;
  ctx.inputs = task.inputs;
  ctx.outputs = task.outputs;
  ctx.attrs = task.attrs;
  ctx.device = info_;
  ctx.pool = pool_.get();
  auto t0 = std::chrono::steady_clock::now();
  Status st = task.impl->fn(ctx);
  timing->execute_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace kerneld::server
