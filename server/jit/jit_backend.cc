#include "jit/jit_backend.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "jit/nvrtc_loader.h"
#include "jit/source_tree.h"
#include "kerneld/check.h"
#include "metrics/daemon_log.h"

namespace kerneld::server::jit {

struct JitBackend::Spec {
  std::string op, header, kernel;
  enum class State { kIdle, kQueued, kCompiling, kReady, kFailed };
  State state = State::kIdle;      // guarded by JitBackend::mu_
  std::string error;               // guarded by JitBackend::mu_
  std::atomic<bool> ready{false};  // loaded on every GPU

  std::mutex mu;  // compiles and loads of this kernel; the maps below
  std::map<std::string, std::shared_ptr<CompiledModule>> modules;  // by arch
  std::map<std::string, std::string> keys;                         // by arch
  std::map<int, Loaded> loaded;                                    // by device ordinal
};

namespace {

std::string ArchOf(const DeviceInfo& d) { return "sm_" + std::to_string(d.compute_capability); }

const char* StateName(int s) {
  static const char* names[] = {"idle", "queued", "compiling", "ready", "failed"};
  return names[s];
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// "16x4096" -> {16, 4096}.
bool ParseShape(const std::string& text, Shape* out) {
  out->clear();
  std::stringstream ss(text);
  std::string dim;
  while (std::getline(ss, dim, 'x')) {
    if (dim.empty() || dim.size() > 12 || dim.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out->push_back(std::stoll(dim));
  }
  return !out->empty();
}

}  // namespace

JitBackend::JitBackend(Options opts, std::vector<DeviceInfo> gpus)
    : opts_(std::move(opts)), gpus_(std::move(gpus)) {}

JitBackend::~JitBackend() {
  if (GetJitEngine() == this) SetJitEngine(nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JitBackend::Start() {
  std::string why;
  nvrtc_ = LoadNvrtc("", &why);
  if (nvrtc_ == nullptr) {
    unavailable_ = why;
    DaemonLog(LogLevel::kInfo, "jit", "nvrtc backend off: " + why, {{"mode", opts_.mode}});
    return;
  }
  compiler_ = std::make_unique<Compiler>(nvrtc_, &SourceTree::Default());
  cache_ = std::make_unique<DiskCache>(CacheOptions{opts_.cache_dir, opts_.max_bytes});
  if (Status s = cache_->Open(); !s.ok())
    DaemonLog(LogLevel::kWarning, "jit_cache", "JIT cache unusable: " + cache_->reason(),
              {{"dir", cache_->dir()}});
  if (opts_.mode == "off") {
    unavailable_ = "--jit=off";
  } else if (gpus_.empty()) {
    unavailable_ = "no CUDA device";
  } else if ((driver_ = LoadCudaDriver(&why)) == nullptr) {
    unavailable_ = why;
  }
  DaemonLog(LogLevel::kInfo, "jit",
            "nvrtc " + nvrtc_->VersionString() + " from " + nvrtc_->library + "; cache " +
                (cache_->enabled() ? cache_->dir() : std::string("off")) + "; --jit=" + opts_.mode +
                (unavailable_.empty() ? "" : "; not serving: " + unavailable_),
            {{"mode", opts_.mode}, {"cache_dir", cache_->dir()}});
  if (unavailable_.empty() && opts_.mode == "async")
    thread_ = std::thread([this] { CompileLoop(); });
}

std::optional<std::string> JitBackend::Unavailable() const {
  if (unavailable_.empty()) return std::nullopt;
  return unavailable_;
}

std::string JitBackend::NvrtcVersion() const {
  return nvrtc_ != nullptr ? nvrtc_->VersionString() : "";
}

const DeviceInfo* JitBackend::Gpu(int ordinal) const {
  for (const DeviceInfo& d : gpus_)
    if (d.device.index == ordinal) return &d;
  return nullptr;
}

JitBackend::Spec* JitBackend::Find(const JitLaunch& launch, const std::string& op, bool create) {
  std::string id = launch.header + '\n' + launch.kernel;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = specs_.find(id);
  if (it != specs_.end()) return it->second.get();
  if (!create) return nullptr;
  auto spec = std::make_unique<Spec>();
  spec->op = op;
  spec->header = launch.header;
  spec->kernel = launch.kernel;
  Spec* raw = spec.get();
  specs_.emplace(std::move(id), std::move(spec));
  return raw;
}

std::optional<int> JitBackend::Rank(const OpDef& op, const KernelContext& probe,
                                    const JitPlanFn& plan) {
  if (!unavailable_.empty()) return std::nullopt;
  if (opts_.mode == "sync") return kPriorityJitReady;
  const DeviceInfo& gpu = gpus_.front();
  JitLaunch launch;
  if (!plan(probe, {gpu.sm_count, gpu.compute_capability}, &launch).ok()) return -1;
  if (launch.empty) return std::nullopt;
  Spec* spec = Find(launch, op.name, true);
  if (spec->ready.load(std::memory_order_acquire)) return kPriorityJitReady;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (spec->state == Spec::State::kIdle && queue_.size() < opts_.queue_capacity && !stopping_) {
      spec->state = Spec::State::kQueued;
      queue_.push_back(spec);
      queued = true;
    }
  }
  if (queued) cv_.notify_one();
  return kPriorityJitPending;
}

Status JitBackend::CompileFor(Spec* spec, const std::string& arch,
                              std::shared_ptr<CompiledModule>* out, WarmResult* info) {
  if (auto it = spec->modules.find(arch); it != spec->modules.end()) {
    *out = it->second;
    if (info != nullptr) {
      info->key = spec->keys[arch];
      info->cache_hit = true;
    }
    return Status::Ok();
  }
  KernelSpec ks{spec->header, {spec->kernel}, arch, {}};
  Program program;
  if (Status s = compiler_->Prepare(ks, &program); !s.ok()) return s;
  auto module = std::make_shared<CompiledModule>();
  bool hit = false;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = cache_->GetOrCompile(
      program.key, [&](CompiledModule* m) { return compiler_->Compile(program, m); }, module.get(),
      &hit);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    DaemonLog(LogLevel::kError, "jit_compile",
              "JIT compile of " + spec->kernel + " for " + arch + " failed: " + s.message(),
              {{"key", program.key}, {"kernel", spec->kernel}, {"arch", arch}});
    return s;
  }
  DaemonLog(LogLevel::kInfo, "jit_compile",
            std::string(hit ? "loaded " : "compiled ") + spec->kernel + " for " + arch + " in " +
                Seconds(secs) + " s" + (hit ? " (disk cache)" : ""),
            {{"key", program.key},
             {"kernel", spec->kernel},
             {"arch", arch},
             {"seconds", Seconds(secs)},
             {"cache", hit ? "hit" : "miss"}});
  if (!hit && cache_->enabled()) {
    if (std::string e = cache_->last_store_error(); !e.empty())
      DaemonLog(LogLevel::kWarning, "jit_cache", "JIT cache write failed: " + e,
                {{"key", program.key}});
  }
  spec->modules[arch] = module;
  spec->keys[arch] = program.key;
  *out = std::move(module);
  if (info != nullptr) {
    info->key = program.key;
    info->cache_hit = hit;
    info->seconds = secs;
  }
  return Status::Ok();
}

Status JitBackend::EnsureLoadedLocked(Spec* spec, const DeviceInfo& dev, Loaded** out) {
  const int ordinal = dev.device.index;
  if (auto it = spec->loaded.find(ordinal); it != spec->loaded.end()) {
    *out = &it->second;
    return Status::Ok();
  }
  if (driver_ == nullptr) return FailedPrecondition("nvrtc: " + unavailable_);
  std::shared_ptr<CompiledModule> module;
  if (Status s = CompileFor(spec, ArchOf(dev), &module, nullptr); !s.ok()) return s;
  Loaded ld;
  if (Status s = LoadedModule::Load(*driver_, ordinal, *module, &ld.module); !s.ok()) return s;
  std::string why;
  ld.fn = ld.module->Find(spec->kernel, &why);
  if (ld.fn == nullptr) return Internal("nvrtc: " + why);
  Loaded& stored = spec->loaded[ordinal] = std::move(ld);
  *out = &stored;
  if (spec->loaded.size() == gpus_.size()) {
    spec->ready.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mu_);
    spec->state = Spec::State::kReady;
  }
  return Status::Ok();
}

Status JitBackend::Run(KernelContext& ctx, const JitPlanFn& plan) {
  if (!unavailable_.empty()) return FailedPrecondition("nvrtc: " + unavailable_);
  JitLaunch launch;
  if (Status s = plan(ctx, {ctx.device.sm_count, ctx.device.compute_capability}, &launch); !s.ok())
    return s;
  if (launch.empty) return Status::Ok();
  Spec* spec = Find(launch, ctx.op->name, true);
  Loaded* ld = nullptr;
  unsigned grid_x = launch.grid.x;
  const unsigned cluster = launch.cluster.x * launch.cluster.y * launch.cluster.z;
  {
    std::lock_guard<std::mutex> lock(spec->mu);
    if (Status s = EnsureLoadedLocked(spec, ctx.device, &ld); !s.ok()) return s;
    if (cluster > 1 &&
        (driver_->launch_kernel_ex == nullptr || driver_->func_set_attribute == nullptr))
      return FailedPrecondition("nvrtc: " + launch.kernel +
                                " launches as thread-block clusters, which this driver lacks "
                                "(cuLaunchKernelEx: CUDA 12 or later)");
    if (cluster > 8 && !ld->non_portable_clusters) {
      // Clusters of more than 8 blocks (up to 16 on an H100) are opted in
      // per function, as the AOT launchers do with cudaFuncSetAttribute.
      const int r = driver_->func_set_attribute(ld->fn, kFuncAttributeNonPortableClusterSize, 1);
      if (r != 0)
        return Internal("nvrtc: clusters of " + std::to_string(cluster) + " blocks for " +
                        launch.kernel + ": " + driver_->ErrorName(r));
      ld->non_portable_clusters = true;
    }
    if (launch.cap_grid_at_residency && ctx.device.sm_count > 0) {
      auto [it, fresh] = ld->occupancy.try_emplace(launch.block.x * launch.block.y, 1);
      if (fresh) {
        int blocks = 0;
        if (driver_->occupancy_max_active_blocks(&blocks, ld->fn,
                                                 static_cast<int>(launch.block.x * launch.block.y),
                                                 launch.shared_bytes) == 0 &&
            blocks > 0)
          it->second = blocks;
      }
      const int64_t cap = int64_t{it->second} * ctx.device.sm_count;
      if (grid_x > cap) grid_x = static_cast<unsigned>(cap);
    }
  }
  std::vector<void*> params = launch.args.Params();
  if (cluster > 1) return LaunchClusters(launch, ld->fn, params.data(), ctx.stream);
  const int r = driver_->launch_kernel(ld->fn, grid_x, launch.grid.y, launch.grid.z, launch.block.x,
                                       launch.block.y, launch.block.z, launch.shared_bytes,
                                       ctx.stream, params.data(), nullptr);
  if (r != 0)
    return Internal("nvrtc: cuLaunchKernel(" + launch.kernel + "): " + driver_->ErrorName(r));
  return Status::Ok();
}

Status JitBackend::LaunchClusters(const JitLaunch& launch, CudaDriverApi::Function fn,
                                  void** params, void* stream) {
  const unsigned cluster = launch.cluster.x * launch.cluster.y * launch.cluster.z;
  LaunchAttribute attr;
  attr.id = kLaunchAttributeClusterDimension;
  attr.value.cluster_dim[0] = launch.cluster.x;
  attr.value.cluster_dim[1] = launch.cluster.y;
  attr.value.cluster_dim[2] = launch.cluster.z;
  LaunchConfig cfg;
  cfg.grid_x = launch.grid.x;
  cfg.grid_y = launch.grid.y;
  cfg.grid_z = launch.grid.z;
  cfg.block_x = launch.block.x;
  cfg.block_y = launch.block.y;
  cfg.block_z = launch.block.z;
  cfg.shared_bytes = launch.shared_bytes;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.num_attrs = 1;
  const int r = driver_->launch_kernel_ex(&cfg, fn, params, nullptr);
  if (r != 0)
    return Internal("nvrtc: cuLaunchKernelEx(" + launch.kernel + ", clusters of " +
                    std::to_string(cluster) + "): " + driver_->ErrorName(r));
  return Status::Ok();
}

void JitBackend::CompileEverywhere(Spec* spec) {
  std::string error;
  {
    std::lock_guard<std::mutex> lock(spec->mu);
    for (const DeviceInfo& d : gpus_) {
      Loaded* ld = nullptr;
      if (Status s = EnsureLoadedLocked(spec, d, &ld); !s.ok()) {
        error = d.device.ToString() + ": " + s.message();
        break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.empty()) {
    spec->state = Spec::State::kFailed;
    spec->error = error;
    DaemonLog(LogLevel::kWarning, "jit_compile",
              "JIT kernel " + spec->kernel + " stays on AOT: " + error, {{"kernel", spec->kernel}});
  }
}

void JitBackend::CompileLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Spec* spec = queue_.front();
    queue_.pop_front();
    if (spec->state == Spec::State::kQueued) spec->state = Spec::State::kCompiling;
    ++compiling_;
    lock.unlock();
    CompileEverywhere(spec);
    lock.lock();
    --compiling_;
    if (queue_.empty() && compiling_ == 0) idle_cv_.notify_all();
  }
}

void JitBackend::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return stopping_ || (queue_.empty() && compiling_ == 0); });
}

Status JitBackend::Warm(const std::string& op_name, DType dtype, const Shape& first_input,
                        const std::string& arch, int sm_count, std::vector<WarmResult>* out) {
  if (nvrtc_ == nullptr) return FailedPrecondition("nvrtc: " + unavailable_);
  const OpDef* op = OpRegistry::Global().Find(op_name);
  if (op == nullptr || op->test_only()) return NotFound("no op " + Quote(op_name));
  const JitPlanFn* plan = FindJitPlan(op_name);
  if (plan == nullptr) {
    std::string why = op_name + " has no JIT form";
    if (!KERNELD_CUDA_BUILT)
      why += " in this build (built without CUDA: the JIT plans come with the CUDA kernels)";
    else
      why += "; JIT ops are {" + Join(JitOps()) + "}";
    return FailedPrecondition(why);
  }
  std::vector<std::string> archs;
  if (!arch.empty()) {
    const int cc = ArchComputeCapability(arch);
    if (cc < 0) return InvalidArgument("arch " + Quote(arch) + ": expected sm_XY (sm_90)");
    if (!nvrtc_->SupportsArch(cc))
      return InvalidArgument("NVRTC " + nvrtc_->VersionString() + " cannot compile for " + arch);
    archs.push_back(arch);
  } else {
    std::set<std::string> seen;
    for (const DeviceInfo& d : gpus_)
      if (seen.insert(ArchOf(d)).second) archs.push_back(ArchOf(d));
    if (archs.empty())
      return FailedPrecondition(
          "no CUDA device here: name the architecture to compile for (arch \"sm_90\")");
  }

  // The request a client would send: the first input's shape given, the
  // others from the schema's patterns (weight [hidden_size], ...), default
  // attrs; views without memory on a GPU (aligned, as staged inputs are).
  KernelContext ctx;
  ctx.op = op;
  if (Status s = ResolveAttrs(*op, {}, &ctx.attrs); !s.ok()) return s;
  ShapeBindings bind;
  for (size_t i = 0; i < op->inputs.size(); ++i) {
    const InputDef& in = op->inputs[i];
    TensorView v;
    v.device = Device::Cuda(0);
    v.dtype = dtype;
    if (!in.dtypes.Contains(dtype))
      return InvalidArgument(op_name + ": input " + Quote(in.name) + " takes " +
                             in.dtypes.ToString() + ", not " + std::string(DTypeName(dtype)));
    if (i == 0) {
      v.shape = first_input;
      if (Status s = MatchShape(op_name, Quote(in.name), in.shape, v.shape, &bind); !s.ok())
        return s;
    } else {
      const ShapePattern pat = in.gen_shape.empty() ? in.shape : ShapePattern::Parse(in.gen_shape);
      if (Status s = EvalShape(op_name, pat, bind, &v.shape); !s.ok()) return s;
    }
    ctx.inputs.push_back(std::move(v));
  }
  bind = {};
  if (Status s = ValidateInputs(*op, ctx.inputs, ctx.attrs, &bind); !s.ok()) return s;
  std::vector<OutputSpec> outs;
  if (Status s = InferOutputs(*op, ctx.inputs, ctx.attrs, bind, &outs); !s.ok()) return s;
  for (const OutputSpec& o : outs) {
    TensorView v;
    v.device = Device::Cuda(0);
    v.dtype = o.dtype;
    v.shape = o.shape;
    ctx.outputs.push_back(std::move(v));
  }

  for (const std::string& a : archs) {
    const int cc = ArchComputeCapability(a);
    int sms = sm_count;
    for (const DeviceInfo& d : gpus_)
      if (sms <= 0 && d.compute_capability == cc) sms = d.sm_count;
    JitLaunch launch;
    if (Status s = (*plan)(ctx, {sms, cc}, &launch); !s.ok()) return s;
    if (launch.empty) continue;
    Spec* spec = Find(launch, op_name, true);
    WarmResult r;
    r.op = op_name;
    r.kernel = launch.kernel;
    r.arch = a;
    std::lock_guard<std::mutex> lock(spec->mu);
    std::shared_ptr<CompiledModule> module;
    if (Status s = CompileFor(spec, a, &module, &r); !s.ok()) return s;
    for (const DeviceInfo& d : gpus_) {
      if (ArchOf(d) != a || driver_ == nullptr) continue;
      Loaded* ld = nullptr;
      if (Status s = EnsureLoadedLocked(spec, d, &ld); !s.ok()) return s;
      ++r.devices_loaded;
    }
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

Status JitBackend::WarmFile(const std::string& path, std::vector<WarmResult>* out,
                            const std::string& default_arch, int sm_count, bool strict) {
  std::ifstream f(path);
  if (!f) return InvalidArgument("--jit_warm: cannot read " + path);
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::string op, dtype_name, shape_text, arch, extra;
    if (!(ls >> op)) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    if (!(ls >> dtype_name >> shape_text) || (ls >> arch && ls >> extra))
      return InvalidArgument(where +
                             "expected \"op dtype shape [arch]\" (rmsnorm bfloat16 16x4096)");
    const auto dtype = ParseDType(dtype_name);
    if (!dtype) return InvalidArgument(where + "unknown dtype " + Quote(dtype_name));
    Shape shape;
    if (!ParseShape(shape_text, &shape))
      return InvalidArgument(where + "bad shape " + Quote(shape_text) + " (16x4096)");
    if (!OpRegistry::Global().Find(op)) return InvalidArgument(where + "no op " + Quote(op));
    // What this host cannot compile or load (no libnvrtc, no GPU, no JIT
    // form in this build) is logged, not fatal: one warm list serves
    // every host of a deployment.
    if (arch.empty()) arch = default_arch;
    if (Status s = Warm(op, *dtype, shape, arch, sm_count, out); !s.ok()) {
      if (strict || s.code() != StatusCode::kFailedPrecondition)
        return Status(s.code(), where + s.message());
      DaemonLog(LogLevel::kWarning, "jit_warm", "--jit_warm: " + where + s.message(),
                {{"file", path}, {"line", std::to_string(n)}});
    }
  }
  return Status::Ok();
}

std::vector<JitBackend::Specialization> JitBackend::Specializations() const {
  std::vector<Specialization> out;
  std::vector<Spec*> specs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, s] : specs_) {
      Specialization o;
      o.op = s->op;
      o.kernel = s->kernel;
      o.header = s->header;
      o.state = StateName(static_cast<int>(s->state));
      o.error = s->error;
      out.push_back(std::move(o));
      specs.push_back(s.get());
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    std::lock_guard<std::mutex> lock(specs[i]->mu);
    for (const auto& [a, key] : specs[i]->keys) out[i].keys.push_back(key);
    out[i].devices_loaded = static_cast<int>(specs[i]->loaded.size());
  }
  return out;
}

}  // namespace kerneld::server::jit
