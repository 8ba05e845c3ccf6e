#include "sandbox/user_kernel_setup.h"

#include "metrics/daemon_log.h"
#include "sandbox/admin_service.h"

namespace kerneld::server::sandbox {

UserKernelServices::~UserKernelServices() {
  if (UserKernels() == registry.get()) SetUserKernels(nullptr);
}

std::unique_ptr<UserKernelServices> StartUserKernels(const Config& cfg,
                                                     const DeviceManager& devices, bool sync_api) {
  auto s = std::make_unique<UserKernelServices>();
  UserKernelPolicy policy;
  ParseUserKernelRoles(cfg.allow_user_kernels, &policy);  // checked by ParseFlags
  policy.visible_to_all = cfg.user_kernel_visibility == "all";
  policy.compiles_per_minute = cfg.user_kernel_compiles_per_minute;
  policy.max_per_principal = cfg.max_user_kernels;
  policy.default_arch = cfg.user_kernel_arch;
  std::vector<int> ccs;
  for (const auto& w : devices.workers())
    if (w->info().device.is_cuda()) ccs.push_back(w->info().compute_capability);
  if (policy.enabled) {
    jit::CacheOptions co;
    co.dir = cfg.jit_cache_dir;
    co.max_bytes = int64_t{cfg.jit_cache_max_mb} << 20;
    s->cache = std::make_unique<jit::DiskCache>(co);
    (void)s->cache->Open();  // off: compiles stay in memory (its reason is the JIT's too)
    s->launcher = MakeSandboxLauncher(cfg, devices);
    DaemonLog(
        LogLevel::kInfo, "user_kernels",
        "user kernels on (--allow_user_kernels=" + cfg.allow_user_kernels + ", visibility " +
            cfg.user_kernel_visibility + "); " +
            (s->launcher ? "they run in a sandbox process per GPU"
                         : "this host cannot run them (" +
                               std::string(ccs.empty() ? "no GPU" : "no sandbox in this build") +
                               "): they compile and list, and Execute answers why not"),
        {{"roles", cfg.allow_user_kernels}});
  }
  s->registry =
      std::make_unique<UserKernelRegistry>(policy, ccs, s->cache.get(), s->launcher.get());
  SetUserKernels(s->registry.get());
  AdminHandlers h{*s->registry, !ccs.empty(), s->launcher.get()};
  if (sync_api)
    s->service = std::make_unique<AdminServiceSyncImpl>(h);
  else
    s->service = std::make_unique<AdminServiceImpl>(h);
  return s;
}

}  // namespace kerneld::server::sandbox
