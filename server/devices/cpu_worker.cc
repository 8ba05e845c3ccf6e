#include "devices/cpu_worker.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "kerneld/call.h"

namespace kerneld::server {

namespace {
int64_t Ns(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}
}  // namespace

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
  KernelContext& ctx = task.call;  // the request's own form, run in place
  for (const auto& t : ctx.inputs)
    if (!t.device.is_cpu()) return Internal("cpu worker got a tensor on " + t.device.ToString());
  ctx.device = info_;
  ctx.pool = pool_.get();
  const auto t0 = std::chrono::steady_clock::now();
  Status st = Call(*task.impl, ctx);  // the library's call path (kerneld/call.h)
  const auto t1 = std::chrono::steady_clock::now();
  timing->launched_ns = Ns(t0 - task.arrival);
  timing->kernel_done_ns = Ns(t1 - task.arrival);
  timing->execute_ns = Ns(t1 - t0);
  return st;
}

}  // namespace kerneld::server
