// The nvrtc backend against the AOT kernels (docs/jit.md, issue 29's
// measurements), per kernel a request of each case would run:
//  - cold: the key and an NVRTC compile into an empty cache directory
//    (what the first request of a specialization costs a fresh host);
//  - warm: the key, the cache hit (read and checked) and cuModuleLoadData
//    (what a daemon restarted on a warmed cache pays once);
//  - the JIT kernel's time and the AOT kernel's ("cuda" impl), median of
//    --reps runs each after an L2 read-flush (CUDA events), beside a
//    device-to-device copy of the same bytes in the same run;
//  - whether the two kernels' outputs agree (bit for bit, else the largest
//    difference).
// The JIT side is the op's own plan (kernels/ops/<op>/jit.cu) compiled and
// launched as the daemon's engine does (server/jit/jit_backend.cc), without
// the daemon. Prints a table, and --csv FILE writes the same rows.
//
//   jit_bench [--reps 30] [--ops rmsnorm,softmax] [--dtypes bfloat16,float16]
//             [--tokens 1,16,64] [--csv out.csv] [--cache-dir DIR]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_cuda.cuh"
#include "bench_device.h"
#include "common/cuda/split_row_plan.h"
#include "jit/compiler.h"
#include "jit/cuda_driver.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc_loader.h"
#include "jit/source_tree.h"
#include "kerneld/call.h"
#include "kerneld/jit.h"
#include "kerneld/op.h"

namespace kerneld {
namespace {

using server::jit::CacheOptions;
using server::jit::CompiledModule;
using server::jit::Compiler;
using server::jit::CudaDriverApi;
using server::jit::DiskCache;
using server::jit::KernelSpec;
using server::jit::LoadedModule;
using server::jit::Program;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One case: an op, a dtype, its inputs' shapes.
struct Case {
  std::string op;
  std::string label;  // "16x32768"
  std::map<std::string, Shape> shapes;
};

// The issue's shapes: the norms at hidden 8192-32768, the gated MLPs at
// [T, 2 x I] for Llama/Mixtral-sized I, softmax over vocabularies, rope at
// Llama-3-8B's heads; T tokens each.
std::vector<Case> Cases(const std::vector<int64_t>& tokens) {
  std::vector<Case> out;
  auto add = [&](const std::string& op, int64_t t, int64_t w, std::map<std::string, Shape> s) {
    out.push_back({op, std::to_string(t) + "x" + std::to_string(w), std::move(s)});
  };
  for (int64_t t : tokens) {
    for (int64_t h : {8192, 16384, 32768}) {
      add("rmsnorm", t, h, {{"x", {t, h}}, {"weight", {h}}});
      add("fused_add_rmsnorm", t, h, {{"x", {t, h}}, {"residual", {t, h}}, {"weight", {h}}});
    }
    add("layernorm", t, 8192, {{"x", {t, 8192}}, {"gamma", {8192}}, {"beta", {8192}}});
    for (int64_t i : {14336, 18432, 28672, 53248}) {
      add("silu_and_mul", t, 2 * i, {{"x", {t, 2 * i}}});
      add("gelu_and_mul", t, 2 * i, {{"x", {t, 2 * i}}});
    }
    for (int64_t v : {32000, 128256}) add("softmax", t, v, {{"logits", {t, v}}});
    add("rope", t, 128,
        {{"q", {t, 32, 128}},
         {"k", {t, 8, 128}},
         {"positions", {t}},
         {"cos_sin_cache", {8192, 128}}});
  }
  return out;
}

// Values in [-1, 1) as dtype `dt`, or positions in [0, limit) for integers.
std::string HostValues(DType dt, int64_t n, int64_t limit, std::mt19937& rng) {
  std::string b(static_cast<size_t>(n * ItemSize(dt)), '\0');
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const size_t o = static_cast<size_t>(i * ItemSize(dt));
    switch (dt) {
      case DType::kFloat16: {
        const __half h = __float2half(u(rng));
        std::memcpy(&b[o], &h, 2);
        break;
      }
      case DType::kBFloat16: {
        const __nv_bfloat16 h = __float2bfloat16(u(rng));
        std::memcpy(&b[o], &h, 2);
        break;
      }
      case DType::kFloat32: {
        const float f = u(rng);
        std::memcpy(&b[o], &f, 4);
        break;
      }
      case DType::kInt32: {
        const int32_t v = static_cast<int32_t>(i % limit);
        std::memcpy(&b[o], &v, 4);
        break;
      }
      case DType::kInt64: {
        const int64_t v = i % limit;
        std::memcpy(&b[o], &v, 8);
        break;
      }
      default:
        break;
    }
  }
  return b;
}

// An op's call on device memory (inputs filled once; `Reset` restores them,
// for the in-place ops); PrepareCall lays the outputs out as the daemon does.
struct Call {
  KernelContext ctx;
  std::vector<void*> allocs;
  std::vector<std::string> initial;  // each input's bytes
  ~Call() {
    for (void* p : allocs) cudaFree(p);
  }
  void* Alloc(int64_t bytes) {
    void* p = nullptr;
    CK(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 16))));
    allocs.push_back(p);
    return p;
  }
  void Reset() {
    for (size_t i = 0; i < ctx.inputs.size(); ++i)
      CK(cudaMemcpy(ctx.inputs[i].data, initial[i].data(), initial[i].size(),
                    cudaMemcpyHostToDevice));
  }
  std::vector<std::string> ReadOutputs() {
    CK(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)));
    std::vector<std::string> out;
    for (const TensorView& v : ctx.outputs) {
      std::string b(static_cast<size_t>(v.nbytes()), '\0');
      CK(cudaMemcpy(b.data(), v.raw(), b.size(), cudaMemcpyDeviceToHost));
      out.push_back(std::move(b));
    }
    return out;
  }
};

double AsDouble(DType dt, const std::string& b, size_t i) {
  switch (dt) {
    case DType::kFloat16: {
      __half h;
      std::memcpy(&h, &b[i * 2], 2);
      return __half2float(h);
    }
    case DType::kBFloat16: {
      __nv_bfloat16 h;
      std::memcpy(&h, &b[i * 2], 2);
      return __bfloat162float(h);
    }
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, &b[i * 4], 4);
      return f;
    }
    default:
      return 0;
  }
}

// "same" when bit for bit, else the largest |difference|.
std::string Agreement(const KernelContext& ctx, const std::vector<std::string>& a,
                      const std::vector<std::string>& b) {
  double worst = 0;
  bool same = true;
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o] == b[o]) continue;
    same = false;
    const DType dt = ctx.outputs[o].dtype;
    const size_t n = a[o].size() / ItemSize(dt);
    for (size_t i = 0; i < n; ++i) {
      const double d = std::fabs(AsDouble(dt, a[o], i) - AsDouble(dt, b[o], i));
      if (d > worst || std::isnan(d)) worst = std::isnan(d) ? INFINITY : d;
    }
  }
  if (same) return "same";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", worst);
  return buf;
}

// The JIT kernel of one launch, compiled and loaded as the engine does.
struct JitKernel {
  double cold_s = 0, warm_ms = 0;
  std::unique_ptr<LoadedModule> module;
  CudaDriverApi::Function fn = nullptr;
};

// The key, then the cache's entry or an NVRTC compile stored into it.
Status Through(DiskCache& cache, const Compiler& compiler, const KernelSpec& spec,
               CompiledModule* m, bool* hit) {
  Program prog;
  if (Status s = compiler.Prepare(spec, &prog); !s.ok()) return s;
  return cache.GetOrCompile(
      prog.key, [&](CompiledModule* out) { return compiler.Compile(prog, out); }, m, hit);
}

Status Build(const Compiler& compiler, const CudaDriverApi& driver, const std::string& arch,
             const std::string& cache_root, const JitLaunch& launch, JitKernel* k) {
  const KernelSpec spec{launch.header, {launch.kernel}, arch, {}};
  // Cold: a cache directory of its own, empty.
  std::string tmpl = cache_root + "/cold-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Internal("mkdtemp failed under " + cache_root);
  {
    DiskCache cache(CacheOptions{tmpl, 0});
    if (!cache.Open().ok()) return Internal(cache.reason());
    const auto t0 = std::chrono::steady_clock::now();
    CompiledModule m;
    bool hit = true;
    if (Status s = Through(cache, compiler, spec, &m, &hit); !s.ok()) return s;
    k->cold_s = Seconds(t0);
    if (hit) return Internal("the empty cache had the key");
  }
  // Warm: another cache object on the same directory (a daemon restarted).
  DiskCache cache(CacheOptions{tmpl, 0});
  if (!cache.Open().ok()) return Internal(cache.reason());
  const auto t0 = std::chrono::steady_clock::now();
  CompiledModule m;
  bool hit = false;
  if (Status s = Through(cache, compiler, spec, &m, &hit); !s.ok()) return s;
  if (Status s = LoadedModule::Load(driver, 0, m, &k->module); !s.ok()) return s;
  std::string why;
  if ((k->fn = k->module->Find(launch.kernel, &why)) == nullptr) return Internal(why);
  k->warm_ms = Seconds(t0) * 1e3;
  if (!hit) return Internal("the warm cache missed");
  return Status::Ok();
}

// Launches a planned kernel as the engine does (Run, LaunchClusters).
int Launch(const CudaDriverApi& d, const JitKernel& k, JitLaunch& launch, int sms, cudaStream_t s) {
  std::vector<void*> params = launch.args.Params();
  unsigned grid_x = launch.grid.x;
  if (launch.cap_grid_at_residency && sms > 0) {
    int blocks = 0;
    if (d.occupancy_max_active_blocks(&blocks, k.fn,
                                      static_cast<int>(launch.block.x * launch.block.y),
                                      launch.shared_bytes) == 0 &&
        blocks > 0)
      grid_x = static_cast<unsigned>(std::min<int64_t>(grid_x, int64_t{blocks} * sms));
  }
  const unsigned cluster = launch.cluster.x * launch.cluster.y * launch.cluster.z;
  if (cluster <= 1)
    return d.launch_kernel(k.fn, grid_x, launch.grid.y, launch.grid.z, launch.block.x,
                           launch.block.y, launch.block.z, launch.shared_bytes, s, params.data(),
                           nullptr);
  if (d.launch_kernel_ex == nullptr) return 1;
  if (cluster > 8) d.func_set_attribute(k.fn, server::jit::kFuncAttributeNonPortableClusterSize, 1);
  server::jit::LaunchAttribute attr;
  attr.id = server::jit::kLaunchAttributeClusterDimension;
  attr.value.cluster_dim[0] = launch.cluster.x;
  attr.value.cluster_dim[1] = launch.cluster.y;
  attr.value.cluster_dim[2] = launch.cluster.z;
  server::jit::LaunchConfig cfg;
  cfg.grid_x = launch.grid.x;
  cfg.grid_y = launch.grid.y;
  cfg.grid_z = launch.grid.z;
  cfg.block_x = launch.block.x;
  cfg.block_y = launch.block.y;
  cfg.block_z = launch.block.z;
  cfg.shared_bytes = launch.shared_bytes;
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.num_attrs = 1;
  return d.launch_kernel_ex(&cfg, k.fn, params.data(), nullptr);
}

std::vector<std::string> SplitList(const char* s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

int Main(int argc, char** argv) {
  int reps = 30;
  std::set<std::string> ops;
  std::vector<std::string> dtypes = {"bfloat16"};
  std::vector<int64_t> tokens = {1, 16, 64};
  std::string csv_path, cache_root;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--reps" && more) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--ops" && more) {
      for (auto& o : SplitList(argv[++i])) ops.insert(o);
    } else if (a == "--dtypes" && more) {
      dtypes = SplitList(argv[++i]);
    } else if (a == "--tokens" && more) {
      tokens.clear();
      for (auto& t : SplitList(argv[++i])) tokens.push_back(std::atoll(t.c_str()));
    } else if (a == "--csv" && more) {
      csv_path = argv[++i];
    } else if (a == "--cache-dir" && more) {
      cache_root = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: jit_bench [--reps N] [--ops a,b] [--dtypes bfloat16,float16] "
                   "[--tokens 1,16,64] [--csv FILE] [--cache-dir DIR]\n");
      return 2;
    }
  }
  std::string why;
  const server::jit::NvrtcApi* nvrtc = server::jit::LoadNvrtc("", &why);
  if (nvrtc == nullptr) return std::fprintf(stderr, "jit_bench: %s\n", why.c_str()), 1;
  const CudaDriverApi* driver = server::jit::LoadCudaDriver(&why);
  if (driver == nullptr) return std::fprintf(stderr, "jit_bench: %s\n", why.c_str()), 1;
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));  // the runtime's primary context, which the driver's loads share
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const DeviceInfo dev = bench::DescribeCudaDevice(0, prop);
  const std::string arch = server::jit::DeviceArch(*driver, 0, &why);
  if (arch.empty()) return std::fprintf(stderr, "jit_bench: %s\n", why.c_str()), 1;
  if (cache_root.empty()) {
    char tmpl[] = "/tmp/kerneld-jit-bench-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) return std::fprintf(stderr, "jit_bench: mkdtemp failed\n"), 1;
    cache_root = d;
  }
  std::filesystem::create_directories(cache_root);
  Compiler compiler(nvrtc, &server::jit::SourceTree::Default());

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  bench::L2Flush flush;
  flush.bytes = static_cast<size_t>(std::max(prop.l2CacheSize, 1 << 20)) * 4;
  void* flush_buf = nullptr;
  CK(cudaMalloc(&flush_buf, flush.bytes));
  CK(cudaMemset(flush_buf, 1, flush.bytes));
  CK(cudaMalloc(&flush.sink, sizeof(unsigned)));
  flush.buf = flush_buf;
  flush.sms = dev.sm_count;

  std::printf("jit_bench: %s (%s, %d SMs), NVRTC %s, L2 read-flushed, median of %d\n", prop.name,
              arch.c_str(), dev.sm_count, nvrtc->VersionString().c_str(), reps);
  std::printf("%-18s %-9s %-10s %8s %8s %9s %9s %9s %8s %7s %7s %-6s %s\n", "op", "dtype", "shape",
              "cold_s", "warm_ms", "aot_us", "jit_us", "1row_us", "jit/aot", "aot_xc", "jit_xc",
              "agree", "kernel");
  std::string csv =
      "op,dtype,shape,kernel,cold_s,warm_ms,aot_us,jit_us,one_row_us,copy_us,jit_over_aot,"
      "aot_x_copy,jit_x_copy,agree\n";
  std::mt19937 rng(29);
  for (const std::string& dt_name : dtypes) {
    const auto dt = ParseDType(dt_name);
    if (!dt) return std::fprintf(stderr, "jit_bench: unknown dtype %s\n", dt_name.c_str()), 2;
    for (const Case& c : Cases(tokens)) {
      if (!ops.empty() && !ops.count(c.op)) continue;
      const OpDef* op = OpRegistry::Global().Find(c.op);
      const JitPlanFn* plan = FindJitPlan(c.op);
      const ImplDef* aot = nullptr;
      if (op != nullptr)
        for (const ImplDef& impl : op->impls)
          if (impl.backend == "cuda") aot = &impl;
      if (op == nullptr || plan == nullptr || aot == nullptr) {
        std::printf("%-18s no op, JIT form or AOT impl in this build\n", c.op.c_str());
        continue;
      }
      Call call;
      call.ctx.device = dev;
      call.ctx.stream = s;
      bool ok = true;
      for (size_t i = 0; i < op->inputs.size(); ++i) {
        const InputDef& in = op->inputs[i];
        DType idt = in.dtypes.Contains(*dt) ? *dt : DType::kInvalid;
        if (c.op == "rope" && in.name == "positions") idt = DType::kInt64;
        if (idt == DType::kInvalid)
          in.dtypes.ForEach([&](DType x) {
            if (idt == DType::kInvalid) idt = x;
          });
        auto it = c.shapes.find(in.name);
        if (it == c.shapes.end()) {
          ok = false;
          break;
        }
        TensorView v;
        v.device = dev.device;
        v.dtype = idt;
        v.shape = it->second;
        v.data = call.Alloc(v.nbytes());
        call.initial.push_back(HostValues(idt, v.numel(), 8192, rng));
        call.ctx.inputs.push_back(std::move(v));
      }
      if (!ok) continue;
      call.Reset();
      const Status prep = PrepareCall(
          *op, {}, "", [&](const OutputSpec&, int64_t n) { return call.Alloc(n); }, &call.ctx);
      if (!prep.ok()) {
        std::printf("%-18s %-9s %-10s skipped: %s\n", c.op.c_str(), dt_name.c_str(),
                    c.label.c_str(), prep.message().c_str());
        continue;
      }
      KernelContext& ctx = call.ctx;
      JitLaunch launch;
      if (Status ps = (*plan)(ctx, {dev.sm_count, dev.compute_capability}, &launch); !ps.ok()) {
        std::printf("%-18s %-9s %-10s no JIT plan: %s\n", c.op.c_str(), dt_name.c_str(),
                    c.label.c_str(), ps.message().c_str());
        continue;
      }
      JitKernel k;
      if (Status bs = Build(compiler, *driver, arch, cache_root, launch, &k); !bs.ok()) {
        std::printf("%-18s %-9s %-10s JIT failed: %s\n", c.op.c_str(), dt_name.c_str(),
                    c.label.c_str(), bs.message().c_str());
        continue;
      }
      // Outputs of one run each, from the same inputs.
      if (Status st = aot->fn(ctx); !st.ok()) {
        std::printf("%-18s AOT failed: %s\n", c.op.c_str(), st.message().c_str());
        continue;
      }
      const std::vector<std::string> aot_out = call.ReadOutputs();
      call.Reset();
      if (int r = Launch(*driver, k, launch, dev.sm_count, s); r != 0) {
        std::printf("%-18s JIT launch failed: %s\n", c.op.c_str(), driver->ErrorName(r).c_str());
        continue;
      }
      const std::string agree = Agreement(ctx, aot_out, call.ReadOutputs());

      int64_t bytes = 0;
      for (const TensorView& v : ctx.inputs) bytes += v.nbytes();
      for (const TensorView& v : ctx.outputs) bytes += v.nbytes();
      void* ca = call.Alloc(bytes / 2);
      void* cb = call.Alloc(bytes / 2);
      const double copy_us = bench::FlushedMedianUs(s, reps, flush, [&] {
        CK(cudaMemcpyAsync(cb, ca, static_cast<size_t>(bytes / 2), cudaMemcpyDeviceToDevice, s));
      });
      const double aot_us = bench::FlushedMedianUs(s, reps, flush, [&] { (void)aot->fn(ctx); });
      const double jit_us = bench::FlushedMedianUs(
          s, reps, flush, [&] { (void)Launch(*driver, k, launch, dev.sm_count, s); });
      // A split-row launch (the norms' few wide rows): the AOT kernel again
      // with rows never split, one block a row, as before the split plan.
      double one_row_us = 0;
      if (launch.cluster.x > 1 && c.op != "softmax") {
        const int old = cuda::g_force_split_rows.exchange(0);
        one_row_us = bench::FlushedMedianUs(s, reps, flush, [&] { (void)aot->fn(ctx); });
        cuda::g_force_split_rows.store(old);
      }
      std::printf("%-18s %-9s %-10s %8.3f %8.2f %9.2f %9.2f %9.2f %8.3f %7.2f %7.2f %-6s %s\n",
                  c.op.c_str(), dt_name.c_str(), c.label.c_str(), k.cold_s, k.warm_ms, aot_us,
                  jit_us, one_row_us, jit_us / aot_us, copy_us / aot_us, copy_us / jit_us,
                  agree.c_str(), launch.kernel.c_str());
      char row[640];
      std::snprintf(row, sizeof row,
                    "%s,%s,%s,\"%s\",%.4f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%s\n",
                    c.op.c_str(), dt_name.c_str(), c.label.c_str(), launch.kernel.c_str(), k.cold_s,
                    k.warm_ms, aot_us, jit_us, one_row_us, copy_us, jit_us / aot_us,
                    copy_us / aot_us, copy_us / jit_us, agree.c_str());
      csv += row;
    }
  }
  if (!csv_path.empty()) {
    FILE* f = std::fopen(csv_path.c_str(), "w");
    if (f == nullptr)
      return std::fprintf(stderr, "jit_bench: cannot write %s\n", csv_path.c_str()), 1;
    std::fputs(csv.c_str(), f);
    std::fclose(f);
    std::printf("wrote %s\n", csv_path.c_str());
  }
  std::printf(
      "aot_xc, jit_xc: copy time / kernel time (x copy); cold: key + NVRTC compile into "
      "an empty cache; warm: key + cache hit + cuModuleLoadData; 1row_us: the norms' AOT "
      "kernel without the split-row plan where it splits (0: not split)\n");
  return 0;
}

}  // namespace
}  // namespace kerneld

int main(int argc, char** argv) { return kerneld::Main(argc, argv); }
