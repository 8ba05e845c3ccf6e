#include "sandbox/user_kernels.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "jit/nvrtc_loader.h"
#include "jit/sha256.h"
#include "kerneld/check.h"
#include "metrics/daemon_log.h"

namespace kerneld::server::sandbox {

namespace {

std::atomic<UserKernelRegistry*> g_registry{nullptr};

int64_t NowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The impl every user op has: on the nvrtc backend, through the launcher.
KernelFn MakeImplFn(std::weak_ptr<UserKernel> weak, UserKernelLauncher* launcher) {
  return [weak, launcher](KernelContext& ctx) -> Status {
    std::shared_ptr<UserKernel> k = weak.lock();
    const std::string name = ctx.op != nullptr ? ctx.op->name : "user kernel";
    if (k == nullptr)
      return NotFound(name + ": the user kernel was unregistered while this request waited");
    if (launcher == nullptr)
      return FailedPrecondition(name +
                                ": this build of kerneld has no sandbox to run user kernels");
    k->calls.fetch_add(1, std::memory_order_relaxed);
    return launcher->Launch(*k, ctx);
  };
}

}  // namespace

void SetUserKernels(UserKernelRegistry* registry) { g_registry.store(registry); }
UserKernelRegistry* UserKernels() { return g_registry.load(); }

bool ParseUserKernelRoles(const std::string& text, UserKernelPolicy* policy) {
  if (text.empty() || text == "false" || text == "0" || text == "no" || text == "off") {
    policy->enabled = false;
    return true;
  }
  policy->enabled = true;
  policy->roles = {Role::kAdmin};
  if (text == "true" || text == "1" || text == "yes") return true;
  std::istringstream in(text);
  std::string role;
  while (std::getline(in, role, ',')) {
    if (role == "admin") continue;  // always
    if (role == "user")
      policy->roles.insert(Role::kUser);
    else
      return false;
  }
  return true;
}

const CompiledUserKernel* UserKernel::ForDevice(int cc) const {
  for (const auto& c : compiled)
    if (jit::ArchComputeCapability(c.arch) == cc) return &c;
  return nullptr;
}

UserKernelRegistry::UserKernelRegistry(UserKernelPolicy policy, std::vector<int> gpu_ccs,
                                       jit::DiskCache* cache, UserKernelLauncher* launcher)
    : policy_(std::move(policy)),
      gpu_ccs_(std::move(gpu_ccs)),
      cache_(cache),
      launcher_(launcher) {}

Status UserKernelRegistry::Admit(const Identity& who, const std::string& what) const {
  if (!policy_.enabled)
    return FailedPrecondition(what +
                              ": user kernels are off on this daemon (the operator starts "
                              "kerneld with --allow_user_kernels to allow them)");
  if (!policy_.roles.count(who.role))
    return {
        StatusCode::kPermissionDenied,
        what + " needs the admin role" +
            std::string(policy_.roles.count(Role::kUser) ? "" : " (--allow_user_kernels=admin)") +
            "; principal " + Quote(who.principal) + " is a user"};
  return Status::Ok();
}

Status UserKernelRegistry::TakeCompileToken(const Principal& who) {
  if (policy_.compiles_per_minute <= 0) return Status::Ok();
  const double cap = policy_.compiles_per_minute;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(rate_mu_);
  auto [it, fresh] = buckets_.try_emplace(who, Bucket{cap, now});
  Bucket& b = it->second;
  if (!fresh) {
    const double secs = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(cap, b.tokens + secs * cap / 60.0);
    b.at = now;
  }
  if (b.tokens < 1.0) {
    const double wait = (1.0 - b.tokens) * 60.0 / cap;
    return ResourceExhausted("RegisterKernel: principal " + Quote(who) + " compiled " +
                             std::to_string(policy_.compiles_per_minute) +
                             " kernels in the last minute (--user_kernel_compiles_per_minute); "
                             "retry in " +
                             std::to_string(static_cast<int>(wait + 1)) + " s");
  }
  b.tokens -= 1.0;
  return Status::Ok();
}

std::vector<std::string> UserKernelRegistry::Archs(const UserKernelSpec& spec) const {
  if (!spec.arch.empty()) return {spec.arch};
  std::set<int> ccs(gpu_ccs_.begin(), gpu_ccs_.end());
  std::vector<std::string> out;
  for (int cc : ccs) out.push_back("sm_" + std::to_string(cc));
  if (out.empty()) out.push_back(policy_.default_arch);
  return out;
}

bool UserKernelRegistry::SeesLocked(const Principal& who, const Principal& owner) const {
  return policy_.visible_to_all || who == owner;
}

Status UserKernelRegistry::Register(const Identity& who, const v1::RegisterKernelRequest& req,
                                    v1::RegisterKernelResponse* resp) {
  KERNELD_RETURN_IF_ERROR(Admit(who, "RegisterKernel"));
  auto k = std::make_shared<UserKernel>();
  KERNELD_RETURN_IF_ERROR(ParseKernelSpec(req, &k->spec));
  const std::string& name = k->spec.name;
  if (OpRegistry::Global().Find(name) != nullptr)
    return {StatusCode::kAlreadyExists,
            "RegisterKernel: " + Quote(name) + " is a built-in op; pick another name"};
  // Collisions before the compile (cheap); again under the lock after it.
  auto collides = [&](std::string* why) {
    int own = 0;
    for (const auto& [key, e] : kernels_) {
      if (key.first == who.principal) ++own;
      if (key.second != name) continue;
      if (key.first == who.principal && !req.options().replace()) {
        *why = "you already have a kernel " + Quote(name) +
               "; set options.replace, or "
               "UnregisterKernel it first";
        return StatusCode::kAlreadyExists;
      }
      if (key.first != who.principal && (policy_.visible_to_all)) {
        *why = Quote(name) + " is another principal's kernel; pick another name";
        return StatusCode::kAlreadyExists;
      }
    }
    if (own >= policy_.max_per_principal && !kernels_.count({who.principal, name})) {
      *why = "principal " + Quote(who.principal) + " has " + std::to_string(own) +
             " kernels registered, the most it may (unregister one first)";
      return StatusCode::kResourceExhausted;
    }
    return StatusCode::kOk;
  };
  {
    std::shared_lock lock(mu_);
    std::string why;
    if (StatusCode c = collides(&why); c != StatusCode::kOk) return {c, "RegisterKernel: " + why};
  }
  std::string nvrtc_why;
  const jit::NvrtcApi* nvrtc = jit::LoadNvrtc("", &nvrtc_why);
  if (nvrtc == nullptr)
    return FailedPrecondition("RegisterKernel: " + name + ": cannot compile: " + nvrtc_why);
  KERNELD_RETURN_IF_ERROR(TakeCompileToken(who.principal));
  k->owner = who.principal;
  k->source = req.cuda_source();
  k->source_sha256 = jit::Sha256::Hex(jit::Sha256::Of(k->source));
  k->registered_unix_ns = NowUnixNs();
  for (const std::string& arch : Archs(k->spec)) {
    CompiledUserKernel c;
    Status st = CompileUserKernel(*nvrtc, cache_, k->spec, k->source, arch, &c);
    DaemonLog(st.ok() ? LogLevel::kInfo : LogLevel::kWarning, "user_kernel_compile",
              "user kernel " + name + " of " + Sanitize(who.principal) + " for " + arch + ": " +
                  (st.ok() ? (c.cache_hit ? "loaded from the cache" : "compiled") +
                                 std::string(" in ") + std::to_string(c.seconds) + " s"
                           : std::string("compile failed")),
              {{"kernel", name}, {"principal", who.principal}, {"arch", arch}});
    if (!st.ok()) return st;
    resp->set_compile_log(resp->compile_log() + c.log);
    resp->set_cache_hit(c.cache_hit);
    resp->set_compile_seconds(resp->compile_seconds() + c.seconds);
    for (const auto& r : c.resources) *resp->add_resources() = r;
    k->compiled.push_back(std::move(c));
  }
  resp->set_compile_log(CutLog(resp->compile_log(), kMaxLogBytes));

  auto op = std::make_unique<OpDef>(BuildOpDef(k->spec));
  Requirements req_cuda = Requirements::Cuda(0);
  if (!k->spec.arch.empty()) {
    const int cc = jit::ArchComputeCapability(k->spec.arch);
    req_cuda.min_compute_capability = req_cuda.max_compute_capability = cc;
  }
  op->Impl("nvrtc", MakeImplFn(k, launcher_), req_cuda, kPriorityDevice);
  std::unique_lock lock(mu_);
  std::string why;
  if (StatusCode c = collides(&why); c != StatusCode::kOk) return {c, "RegisterKernel: " + why};
  Entry& e = kernels_[{who.principal, name}];
  if (e.op != nullptr) by_op_.erase(e.op);
  e.kernel = k;
  e.op = op.get();
  by_op_[op.get()] = k;
  ops_.push_back(std::move(op));
  resp->set_name(name);
  resp->set_owner(who.principal);
  return Status::Ok();
}

Status UserKernelRegistry::Unregister(const Identity& who, const std::string& name) {
  KERNELD_RETURN_IF_ERROR(Admit(who, "UnregisterKernel"));
  std::unique_lock lock(mu_);
  auto it = kernels_.find({who.principal, name});
  if (it == kernels_.end()) return NotFound("UnregisterKernel: you have no kernel " + Quote(name));
  by_op_.erase(it->second.op);
  kernels_.erase(it);  // the OpDef stays in ops_; the code goes with the last request
  return Status::Ok();
}

Status UserKernelRegistry::List(const Identity& who, bool all_principals,
                                v1::ListUserKernelsResponse* resp) const {
  if (!policy_.enabled) return Status::Ok();  // none: nothing to list
  if (all_principals && !who.admin())
    return {StatusCode::kPermissionDenied,
            "ListUserKernels: all_principals needs the admin role; principal " +
                Quote(who.principal) + " is a user"};
  std::shared_lock lock(mu_);
  for (const auto& [key, e] : kernels_) {
    if (!all_principals && !SeesLocked(who.principal, key.first)) continue;
    v1::UserKernelInfo* info = resp->add_kernels();
    const UserKernel& k = *e.kernel;
    info->mutable_kernel()->set_name(k.spec.name);
    info->mutable_kernel()->set_doc(e.op->doc);
    info->set_owner(k.owner);
    info->set_entry(k.spec.entry);
    info->set_launch(k.spec.launch.text());
    info->set_source_sha256(k.source_sha256);
    info->set_registered_unix_ns(k.registered_unix_ns);
    info->set_calls(k.calls.load());
    info->set_faults(k.faults.load());
    for (const auto& c : k.compiled)
      for (const auto& r : c.resources) *info->add_resources() = r;
  }
  return Status::Ok();
}

const OpDef* UserKernelRegistry::Find(const Principal& who, std::string_view name) const {
  if (!policy_.enabled) return nullptr;
  std::shared_lock lock(mu_);
  auto it = kernels_.find({who, std::string(name)});
  if (it != kernels_.end()) return it->second.op;
  if (!policy_.visible_to_all) return nullptr;
  for (const auto& [key, e] : kernels_)
    if (key.second == name) return e.op;
  return nullptr;
}

std::vector<const OpDef*> UserKernelRegistry::Visible(const Principal& who) const {
  std::vector<const OpDef*> out;
  if (!policy_.enabled) return out;
  std::shared_lock lock(mu_);
  for (const auto& [key, e] : kernels_)
    if (SeesLocked(who, key.first)) out.push_back(e.op);
  std::sort(out.begin(), out.end(),
            [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return out;
}

std::shared_ptr<UserKernel> UserKernelRegistry::KernelOf(const OpDef* op) const {
  std::shared_lock lock(mu_);
  auto it = by_op_.find(op);
  return it == by_op_.end() ? nullptr : it->second.lock();
}

}  // namespace kerneld::server::sandbox
