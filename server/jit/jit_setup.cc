#include "jit/jit_setup.h"

#include "metrics/daemon_log.h"

namespace kerneld::server {

std::unique_ptr<jit::JitBackend> StartJit(const Config& cfg, const DeviceManager& devices,
                                          std::string* error) {
  std::vector<DeviceInfo> gpus;
  for (const auto& w : devices.workers())
    if (w->info().device.is_cuda()) gpus.push_back(w->info());
  jit::JitBackend::Options opts;
  opts.mode = cfg.jit;
  opts.cache_dir = cfg.jit_cache_dir;
  opts.max_bytes = int64_t{cfg.jit_cache_max_mb} << 20;
  auto jit = std::make_unique<jit::JitBackend>(opts, std::move(gpus));
  jit->Start();
  SetJitEngine(jit.get());
  if (!cfg.jit_warm.empty()) {
    std::vector<jit::JitBackend::WarmResult> done;
    if (Status s = jit->WarmFile(cfg.jit_warm, &done); !s.ok()) {
      *error = "--jit_warm: " + s.message();
      return jit;
    }
    DaemonLog(LogLevel::kInfo, "jit_warm",
              "--jit_warm: " + std::to_string(done.size()) + " kernels ready from " + cfg.jit_warm,
              {{"file", cfg.jit_warm}});
  }
  return jit;
}

}  // namespace kerneld::server
