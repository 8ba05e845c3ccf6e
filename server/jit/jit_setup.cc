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

int PrecompileJit(const Config& cfg) {
  if (cfg.jit_warm.empty()) {
    DaemonLog(LogLevel::kError, "jit_precompile",
              "--jit_precompile_arch needs --jit_warm=FILE: the kernels to compile");
    return 2;
  }
  jit::JitBackend::Options opts;
  opts.mode = "off";  // nothing serves; Warm compiles for a named arch all the same
  opts.cache_dir = cfg.jit_cache_dir;
  opts.max_bytes = int64_t{cfg.jit_cache_max_mb} << 20;
  jit::JitBackend jit(opts, {});
  jit.Start();
  if (jit.NvrtcVersion().empty()) {
    DaemonLog(LogLevel::kError, "jit_precompile",
              "--jit_precompile_arch: " + jit.Unavailable().value_or("libnvrtc not found"));
    return 1;
  }
  if (!jit.CacheReason().empty()) {
    DaemonLog(LogLevel::kError, "jit_precompile",
              "--jit_precompile_arch: the cache is unusable: " + jit.CacheReason());
    return 1;
  }
  std::vector<jit::JitBackend::WarmResult> done;
  if (Status s = jit.WarmFile(cfg.jit_warm, &done, cfg.jit_precompile_arch, cfg.jit_precompile_sms,
                              /*strict=*/true);
      !s.ok()) {
    DaemonLog(LogLevel::kError, "jit_precompile", "--jit_warm: " + s.message(),
              {{"file", cfg.jit_warm}});
    return 1;
  }
  int compiled = 0;
  for (const auto& r : done) compiled += r.cache_hit ? 0 : 1;
  DaemonLog(LogLevel::kInfo, "jit_precompile",
            "--jit_precompile_arch=" + cfg.jit_precompile_arch + ": " +
                std::to_string(done.size()) + " kernels in " + jit.CacheDir() + " (" +
                std::to_string(compiled) + " compiled, " + std::to_string(done.size() - compiled) +
                " already there)",
            {{"file", cfg.jit_warm}, {"arch", cfg.jit_precompile_arch}});
  return 0;
}

}  // namespace kerneld::server
