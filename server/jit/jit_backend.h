// The nvrtc backend's engine (kerneld/jit.h's JitEngine): an op's JIT plan
// names the kernel of its cuda.cuh a request needs; this compiles it with
// NVRTC for each GPU's exact architecture (through the disk cache), loads
// it with the driver API and launches it on the worker's stream.
//
// --jit=async (default): a request whose kernel is not loaded yet ranks the
// nvrtc impl below the AOT one and queues the compile on one background
// thread (a bounded queue); once the module is loaded on every GPU the
// nvrtc impl outranks the AOT one. --jit=sync: the first request compiles
// on its own thread. --jit=off: the backend is ineligible. A request that
// names backend "nvrtc" compiles on its thread in every mode but off.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "jit/compiler.h"
#include "jit/cuda_driver.h"
#include "jit/disk_cache.h"
#include "kerneld/jit.h"

namespace kerneld::server::jit {

class JitBackend final : public JitEngine {
 public:
  struct Options {
    std::string mode = "async";  // async | sync | off
    std::string cache_dir;       // "": DefaultCacheDir()
    int64_t max_bytes = int64_t{1} << 30;
    size_t queue_capacity = 64;  // background compiles waiting at most
  };
  // `gpus`: the CUDA devices the daemon serves (none on a CPU host).
  JitBackend(Options opts, std::vector<DeviceInfo> gpus);
  ~JitBackend() override;  // stops the compile thread (a compile in progress finishes)

  // Loads libnvrtc (and libcuda where there are GPUs), opens the cache and
  // starts the compile thread; logs what it found. Never fails: a missing
  // piece makes the backend ineligible, with the reason in Unavailable().
  void Start();

  // JitEngine.
  std::optional<std::string> Unavailable() const override;
  std::optional<int> Rank(const OpDef& op, const KernelContext& probe,
                          const JitPlanFn& plan) override;
  Status Run(KernelContext& ctx, const JitPlanFn& plan) override;

  // Compiles the kernel a request would use, for `arch` ("sm_90"; "" for
  // every GPU's), and loads it on the GPUs of that arch. `inputs` are the
  // op's input shapes by name (missing ones are derived from the schema;
  // see WarmShapes). Results per (kernel, arch).
  struct WarmResult {
    std::string op, kernel, arch, key;
    bool cache_hit = false;
    double seconds = 0;
    int devices_loaded = 0;
  };
  Status Warm(const std::string& op, DType dtype, const Shape& first_input, const std::string& arch,
              int sm_count, std::vector<WarmResult>* out);
  // Each line of a warm file: "op dtype shape [arch]" ("rmsnorm bfloat16
  // 16x4096"); '#' starts a comment. Stops at the first bad line (syntax,
  // op, dtype, shape); a kernel this host cannot build (FAILED_PRECONDITION:
  // no libnvrtc, no GPU and no arch, no JIT form) is a warning. A line
  // without an arch compiles for `default_arch` when one is given (else for
  // the daemon's GPUs), planned for `sm_count` SMs (0: the GPUs' own).
  // `strict`: a kernel this host cannot build fails the file too
  // (--jit_precompile_arch), instead of a warning.
  Status WarmFile(const std::string& path, std::vector<WarmResult>* out,
                  const std::string& default_arch = "", int sm_count = 0, bool strict = false);

  struct Specialization {
    std::string op, kernel, header, state, error;  // state: queued|compiling|ready|failed|idle
    std::vector<std::string> keys;                 // one per arch compiled
    int devices_loaded = 0;
  };
  std::vector<Specialization> Specializations() const;
  const DiskCache* cache() const { return cache_.get(); }
  const std::string& mode() const { return opts_.mode; }
  std::string NvrtcVersion() const;
  // Why the cache is off ("" when on).
  std::string CacheReason() const { return cache_ ? cache_->reason() : ""; }
  // The cache's directory ("" before Start or without NVRTC).
  std::string CacheDir() const { return cache_ ? cache_->dir() : ""; }

  // Blocks until the background queue is empty and no compile runs (tests).
  void WaitIdle();

 private:
  struct Spec;
  struct Loaded {
    std::unique_ptr<LoadedModule> module;
    CudaDriverApi::Function fn = nullptr;
    std::map<unsigned, int> occupancy;   // block size -> resident blocks an SM
    bool non_portable_clusters = false;  // opted in to clusters of more than 8 blocks (spec->mu)
  };

  Spec* Find(const JitLaunch& launch, const std::string& op, bool create);
  // Compiles (or loads from the cache) `spec` for `arch`; logs the result.
  Status CompileFor(Spec* spec, const std::string& arch, std::shared_ptr<CompiledModule>* out,
                    WarmResult* info);
  // Compiles for the device's arch if needed and loads on it. spec->mu held by the caller.
  Status EnsureLoadedLocked(Spec* spec, const DeviceInfo& dev, Loaded** out);
  const DeviceInfo* Gpu(int ordinal) const;
  // cuLaunchKernelEx with launch.cluster's shape (opted in by Run).
  Status LaunchClusters(const JitLaunch& launch, CudaDriverApi::Function fn, void** params,
                        void* stream);
  void CompileLoop();
  void CompileEverywhere(Spec* spec);

  Options opts_;
  std::vector<DeviceInfo> gpus_;
  const NvrtcApi* nvrtc_ = nullptr;
  const CudaDriverApi* driver_ = nullptr;
  std::string unavailable_;  // "" when usable
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<DiskCache> cache_;

  mutable std::mutex mu_;                                            // the table and the queue
  std::map<std::string, std::unique_ptr<Spec>, std::less<>> specs_;  // by header + kernel
  std::deque<Spec*> queue_;
  bool stopping_ = false;
  int compiling_ = 0;
  std::condition_variable cv_, idle_cv_;
  std::thread thread_;
};

}  // namespace kerneld::server::jit
