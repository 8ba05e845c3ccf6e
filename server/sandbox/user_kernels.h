// The user kernels a daemon serves (docs/user-kernels.md): registered over
// AdminService, compiled with NVRTC, and served as ops beside the built-ins.
//
// Who may register: nobody unless --allow_user_kernels; then the roles it
// names (admin by default). Who sees a kernel: its owner, or everyone with
// --user_kernel_visibility=all; a name never shadows a built-in op, and
// never another principal's kernel that the caller could see.
//
// An op, once handed out (Find), lives as long as the process: requests in
// flight and the request runner's per-impl caches hold its address. An
// unregistered kernel's OpDef is kept (small) but its compiled code is
// dropped; a request that still reaches it is told it was unregistered.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "auth/identity.h"
#include "kerneld/op.h"
#include "kerneld/v1/kerneld.pb.h"
#include "sandbox/kernel_spec.h"
#include "sandbox/user_compiler.h"

namespace kerneld::server::sandbox {

// One registered kernel: its spec, source, and code per architecture.
struct UserKernel {
  Principal owner;
  UserKernelSpec spec;
  std::string source, source_sha256;
  std::vector<CompiledUserKernel> compiled;  // one per arch
  int64_t registered_unix_ns = 0;
  std::atomic<int64_t> calls{0}, faults{0};
  // The compiled code for a device of compute capability `cc` (90); null
  // when none fits.
  const CompiledUserKernel* ForDevice(int cc) const;
};

// EvaluateKernel's problem, checked on the host (evaluate.h): the user op
// and the built-in on the same inputs and attrs.
struct EvaluateProblem {
  const OpDef* user = nullptr;
  const OpDef* builtin = nullptr;
  HostTensors inputs;
  AttrMap attrs;
  int device = -1;  // CUDA ordinal; -1: the first GPU
  int iterations = 30;
};
// What the GPU gave: each op's outputs, and the median microseconds.
struct EvaluateRun {
  HostTensors user_outputs, builtin_outputs;
  double user_us = 0, builtin_us = 0, copy_us = 0;
  std::string builtin_backend, device;
};

// Runs a user kernel's launch for a validated call (the sandbox's
// supervisor on a CUDA build); null: this build cannot.
class UserKernelLauncher {
 public:
  virtual ~UserKernelLauncher() = default;
  virtual Status Launch(const UserKernel& kernel, KernelContext& ctx) = 0;
  // EvaluateKernel on a GPU: the user kernel run and timed in the sandbox,
  // the built-in and a device copy of the same bytes in the daemon's
  // context, each as kernel_bench times (kerneld/gpu_timing.h).
  virtual Status Evaluate(const UserKernel& kernel, const EvaluateProblem& p, EvaluateRun* out) {
    (void)kernel, (void)p, (void)out;
    return FailedPrecondition("this build cannot run user kernels");
  }
};

struct UserKernelPolicy {
  bool enabled = false;
  std::set<Role> roles = {Role::kAdmin};
  bool visible_to_all = false;   // --user_kernel_visibility=all
  int compiles_per_minute = 30;  // per principal; 0: no limit
  int max_per_principal = 64;
  std::string default_arch = "sm_90";  // without a GPU and without options.arch
};

// "admin", "admin,user", "true" (admin), "false"/"" (off) into *policy.
bool ParseUserKernelRoles(const std::string& text, UserKernelPolicy* policy);

class UserKernelRegistry {
 public:
  // `gpu_ccs`: the compute capabilities of the daemon's GPUs (none on a CPU
  // host). `cache` may be null. `launcher` may be null (a build without CUDA).
  UserKernelRegistry(UserKernelPolicy policy, std::vector<int> gpu_ccs, jit::DiskCache* cache,
                     UserKernelLauncher* launcher);

  Status Register(const Identity& who, const v1::RegisterKernelRequest& req,
                  v1::RegisterKernelResponse* resp);
  Status Unregister(const Identity& who, const std::string& name);
  Status List(const Identity& who, bool all_principals, v1::ListUserKernelsResponse* resp) const;

  // The op `name` as `who` sees it; null when none (built-ins are not here).
  const OpDef* Find(const Principal& who, std::string_view name) const;
  // Every user op `who` sees, sorted by name.
  std::vector<const OpDef*> Visible(const Principal& who) const;
  // The kernel behind a user op, while registered.
  std::shared_ptr<UserKernel> KernelOf(const OpDef* op) const;

  const UserKernelPolicy& policy() const { return policy_; }

 private:
  struct Entry {
    std::shared_ptr<UserKernel> kernel;
    OpDef* op = nullptr;  // owned by ops_
  };
  Status Admit(const Identity& who, const std::string& what) const;
  Status TakeCompileToken(const Principal& who);
  std::vector<std::string> Archs(const UserKernelSpec& spec) const;
  bool SeesLocked(const Principal& who, const Principal& owner) const;

  const UserKernelPolicy policy_;
  const std::vector<int> gpu_ccs_;
  jit::DiskCache* cache_;
  UserKernelLauncher* launcher_;
  mutable std::shared_mutex mu_;
  std::map<std::pair<Principal, std::string>, Entry> kernels_;  // (owner, name)
  std::map<const OpDef*, std::weak_ptr<UserKernel>> by_op_;
  std::vector<std::unique_ptr<OpDef>> ops_;  // every op handed out, never freed
  std::mutex rate_mu_;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::map<Principal, Bucket> buckets_;
};

// The daemon's registry (request decode and ListKernels consult it); null
// until set, and then user kernels are unknown ops.
void SetUserKernels(UserKernelRegistry* registry);
UserKernelRegistry* UserKernels();

}  // namespace kerneld::server::sandbox
