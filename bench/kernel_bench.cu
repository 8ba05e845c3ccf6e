// GPU kernel benchmark: every op x dtype x shape through the registry's
// implementations (the shapes each op registered, OpDef::bench; requests
// prepared by the library's call path, kerneld/call.h), timed with CUDA events (warm-up, median of
// many, optional L2 flush between runs), reported as time, GB/s of the bytes that must move (inputs
// read once, outputs written once) or TFLOP/s, and the ratio to a reference measured in the same
// run: a device-to-device copy of the same bytes (memory-bound ops) or cuBLAS (gemm).
//
//   build/bench/kernel_bench [--flush-l2 | --flush-l2-clean] [--reps N] [--ops a,b] [--shapes
//   decode,mid,large]
//                            [--dtypes float16,...] [--gemm-shapes 16x4096x4096T,...]
//
// --gemm-shapes replaces the gemm shapes (MxNxK, T: transpose_b, b [N, K]).
// --extra-shapes NAME=ROWSxHIDDEN,... adds (rows, hidden) problems beside
// decode, mid and large (e.g. d1=1x4096,v128k=16x128256 for softmax); an op
// may register its own too (OpDef::bench.extra: softmax's vocabularies),
// which --shapes selects by name like the others.
// --json FILE writes one record per measured row (op, dtype, shape, impl,
// us, copy_us, each input's dims, the bench attrs; the bytes counted and
// flops where the op counts them; the values of the index inputs it drew, up to 65536 each):
// bench/peers.py times torch and FlashInfer on exactly those records.
// Integer inputs whose schema says how to draw them (InputGen kIndptr,
// kLength, kPermutation, kSegment, kModulo: the attention ops' page tables)
// are drawn on the host by the same code as kernelctl's
// (kerneld/input_gen.h), from the symbols the problem's shapes bind; other
// integers are i % 8192 of a hash, as before.
// --flush-l2 writes 2 x L2 before each run (leaving dirty lines whose
// write-back the timed kernel pays for); --flush-l2-clean reads 2 x L2.
// Decode-shape gemm rows also give the time of a kernel that only reads b,
// in the same run: the floor for any implementation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_cuda.cuh"
#include "bench_device.h"
#include "kerneld/call.h"
#include "kerneld/input_gen.h"
#include "kerneld/op.h"

using namespace kerneld;

namespace {

__device__ uint32_t Hash(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

// Random data on the device (never zeros): uniform in [lo, hi) for floats,
// i % mod for integers.
__global__ void Fill(void* p, int64_t n, int dtype, uint32_t seed, float lo, float hi,
                     int64_t mod) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float u = lo + (hi - lo) * (Hash(i, seed) >> 8) * (1.0f / 16777216.0f);
    switch (dtype) {
      case 1:
        static_cast<__half*>(p)[i] = __float2half_rn(u);
        break;
      case 2:
        static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(u);
        break;
      case 3:
        static_cast<float*>(p)[i] = u;
        break;
      case 7:
        static_cast<int32_t*>(p)[i] = static_cast<int32_t>(Hash(i, seed) % mod);
        break;
      case 8:
        static_cast<int64_t*>(p)[i] = static_cast<int64_t>(Hash(i, seed) % mod);
        break;
      default:
        break;
    }
  }
}

struct ShapeSet {
  std::string name;
  int64_t rows, hidden;
};

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
};

// How the L2 is flushed before each timed run. A memset of 2 x L2 (dirty)
// leaves the L2 full of modified lines: the timed kernel then also pays for
// writing them back to DRAM, a fixed cost (measured on the H100: a pure
// read of 32 MiB takes 18.9 us after it, 14.6 us after a clean flush).
// Reading 2 x L2 (clean) evicts as well and leaves nothing to write back.
enum class Flush { kNone, kDirty, kClean };
Flush g_flush = Flush::kNone;
unsigned* g_sink = nullptr;
int g_sms = 1;

void ReadBytes(cudaStream_t s, const void* p, size_t bytes) {
  bench::ReadBytes(s, p, bytes, g_sms, g_sink);
}

template <typename F>
double MedianMs(cudaStream_t s, int reps, void* flush, size_t flush_bytes, F&& f) {
  Timer t;
  for (int i = 0; i < 3; ++i) f();  // warm-up
  CK(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    if (flush && g_flush == Flush::kDirty) CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, s));
    if (flush && g_flush == Flush::kClean) ReadBytes(s, flush, flush_bytes);
    CK(cudaEventRecord(t.a, s));
    f();
    CK(cudaEventRecord(t.b, s));
    CK(cudaEventSynchronize(t.b));
    float m;
    CK(cudaEventElapsedTime(&m, t.a, t.b));
    ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// One op's call on device memory it owns: the bench fills the inputs'
// views, PrepareCall (kerneld/call.h, the path the server and the test
// harness take) validates them and lays the outputs out.
struct DeviceCall {
  KernelContext ctx;
  std::vector<void*> allocs;
  DeviceCall(const DeviceInfo& dev, cudaStream_t s) {
    ctx.device = dev;
    ctx.stream = s;
  }
  ~DeviceCall() {
    for (void* p : allocs) cudaFree(p);
  }
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;
  void* Alloc(int64_t bytes) {
    void* p = nullptr;
    CK(cudaMalloc(&p, static_cast<size_t>(bytes)));
    allocs.push_back(p);
    return p;
  }
  // Input `i`: `dt` and `shape`, on the device, random in [lo, hi) from
  // `seed` (integers: i % 8192).
  void Input(size_t i, DType dt, const Shape& shape, float lo, float hi, uint32_t seed) {
    if (ctx.inputs.size() <= i) ctx.inputs.resize(i + 1);
    TensorView& v = ctx.inputs[i];
    v.device = ctx.device.device;
    v.dtype = dt;
    v.shape = shape;
    v.data = Alloc(v.nbytes());
    Fill<<<1024, 256, 0, static_cast<cudaStream_t>(ctx.stream)>>>(
        v.data, v.numel(), static_cast<int>(dt), seed, lo, hi, 8192);
    CK(cudaGetLastError());
  }
  // Input `i`: t's values, copied to the device.
  void InputValues(size_t i, const HostTensor& t) {
    if (ctx.inputs.size() <= i) ctx.inputs.resize(i + 1);
    TensorView& v = ctx.inputs[i];
    v.device = ctx.device.device;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.data = Alloc(v.nbytes());
    const std::string bytes = Encode(t.dtype, t.values);
    CK(cudaMemcpy(v.data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  Status Prepare(const OpDef& op, const AttrMap& attrs) {
    return PrepareCall(
        op, attrs, "", [this](const OutputSpec&, int64_t n) { return Alloc(n); }, &ctx);
  }
};

}  // namespace

int main(int argc, char** argv) {
  bool flush_l2 = false;
  int reps = 50;
  std::set<std::string> only_ops, only_shapes, only_dtypes, gemm_shapes, extra_shapes;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto list = [&](std::set<std::string>* out) {
      std::stringstream ss(argv[++i]);
      for (std::string x; std::getline(ss, x, ',');) out->insert(x);
    };
    if (a == "--flush-l2")
      flush_l2 = true, g_flush = Flush::kDirty;
    else if (a == "--flush-l2-clean")
      flush_l2 = true, g_flush = Flush::kClean;
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--ops" && i + 1 < argc)
      list(&only_ops);
    else if (a == "--shapes" && i + 1 < argc)
      list(&only_shapes);
    else if (a == "--dtypes" && i + 1 < argc)
      list(&only_dtypes);
    else if (a == "--gemm-shapes" && i + 1 < argc)
      list(&gemm_shapes);
    else if (a == "--extra-shapes" && i + 1 < argc)
      list(&extra_shapes);
    else if (a == "--json" && i + 1 < argc)
      json_path = argv[++i];
    else {
      std::fprintf(stderr,
                   "kernel_bench: unknown or incomplete argument '%s' (see the comment at the top "
                   "of kernel_bench.cu)\n",
                   a.c_str());
      return 2;
    }
  }
  auto skip_dtype = [&](DType dt) {
    return !only_dtypes.empty() && !only_dtypes.count(std::string(DTypeName(dt)));
  };
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("kernel_bench: no GPU on this machine; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const DeviceInfo dev = bench::DescribeCudaDevice(0, prop);
  g_sms = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MiB, %s\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20,
              g_flush == Flush::kDirty ? "L2 flushed between runs by a 2 x L2 memset (dirty lines)"
              : g_flush == Flush::kClean ? "L2 flushed between runs by reading 2 x L2 (clean)"
                                         : "L2 warm");
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* flush = nullptr;
  size_t flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  if (flush_l2) {
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMemset(flush, 1, flush_bytes));
  }
  CK(cudaMalloc(&g_sink, sizeof(unsigned)));

  std::vector<ShapeSet> shapes = {
      {"decode", 16, 4096}, {"mid", 4096, 4096}, {"large", 32768, 8192}};
  for (const std::string& e : extra_shapes) {
    long long r = 0, h = 0;
    const size_t eq = e.find('=');
    if (eq == std::string::npos || std::sscanf(e.c_str() + eq + 1, "%lldx%lld", &r, &h) != 2 ||
        r <= 0 || h <= 0) {
      std::fprintf(stderr, "kernel_bench: --extra-shapes wants NAME=ROWSxHIDDEN, got '%s'\n",
                   e.c_str());
      return 2;
    }
    shapes.push_back({e.substr(0, eq), r, h});
  }
  std::string json = "[";
  auto dims = [](const Shape& sh) {
    std::string d = "[";
    for (size_t i = 0; i < sh.size(); ++i) d += (i ? "," : "") + std::to_string(sh[i]);
    return d + "]";
  };
  std::printf("%-22s %-9s %-7s %-8s %10s %10s %10s %8s\n", "op", "dtype", "shape", "impl", "us",
              "GB/s", "copy GB/s", "vs copy");
  // Every op that registered bench shapes (OpDef::bench, beside its schema);
  // gemm has its own table below.
  for (const OpDef* op : OpRegistry::Global().List()) {
    if (op->test_only() || !op->bench.shapes || op->name == "gemm") continue;
    if (!only_ops.empty() && !only_ops.count(op->name)) continue;
    // The shared problems, then the op's own (OpDef::bench.extra) that no
    // --extra-shapes entry already names.
    std::vector<ShapeSet> op_shapes = shapes;
    for (const BenchSpec::Problem& p : op->bench.extra)
      if (std::none_of(shapes.begin(), shapes.end(),
                       [&](const ShapeSet& s) { return s.name == p.name; }))
        op_shapes.push_back({p.name, p.rows, p.hidden});
    for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
      if (skip_dtype(dt)) continue;
      for (const ShapeSet& ss : op_shapes) {
        if (!only_shapes.empty() && !only_shapes.count(ss.name)) continue;
        auto shp = op->bench.shapes(ss.rows, ss.hidden);
        if (std::any_of(op->inputs.begin(), op->inputs.end(),
                        [&](const InputDef& in) { return !shp.count(in.name); }))
          continue;
        // Each input in dt where its schema takes it, else in its first dtype.
        auto dtype_of = [&](const InputDef& in) {
          DType d = in.dtypes.Contains(dt) ? dt : DType::kInvalid;
          if (d == DType::kInvalid)
            in.dtypes.ForEach([&](DType x) {
              if (d == DType::kInvalid) d = x;
            });
          return d;
        };
        if (op->inputs.empty() || dtype_of(op->inputs[0]) != dt) continue;
        DeviceCall call(dev, s);
        KernelContext& ctx = call.ctx;
        float lo = static_cast<float>(op->bench.lo), hi = static_cast<float>(op->bench.hi);
        if (op->bench.range_per_hidden)
          lo /= static_cast<float>(ss.hidden), hi /= static_cast<float>(ss.hidden);
        // Index inputs drawn from their schema; the rest from the hash.
        std::mt19937_64 rng(1);
        const BenchProblem prob = DrawBenchProblem(*op, shp, dt, rng);
        for (size_t i = 0; i < op->inputs.size(); ++i) {
          const InputDef& in = op->inputs[i];
          if (auto drawn = prob.index.find(in.name); drawn != prob.index.end())
            call.InputValues(i, drawn->second);
          else
            call.Input(i, dtype_of(in), shp[in.name], lo, hi, static_cast<uint32_t>(i + 1));
        }
        if (!call.Prepare(*op, op->bench.attrs).ok()) {
          std::printf("%-22s %-9s %-7s skipped: inputs do not validate\n", op->name.c_str(),
                      std::string(DTypeName(dt)).c_str(), ss.name.c_str());
          continue;
        }
        int64_t bytes = 0;
        for (const auto& v : ctx.inputs) bytes += v.nbytes();
        for (const TensorView& v : ctx.outputs) bytes += v.nbytes();
        if (op->bench.bytes) bytes = static_cast<int64_t>(op->bench.bytes(prob));
        const double flops = op->bench.flops ? op->bench.flops(prob) : 0;
        // Reference: a device-to-device copy moving the same bytes (half read, half written).
        void *ca, *cb;
        CK(cudaMalloc(&ca, static_cast<size_t>(bytes / 2)));
        CK(cudaMalloc(&cb, static_cast<size_t>(bytes / 2)));
        const double copy_ms = MedianMs(s, reps, flush, flush_bytes, [&] {
          CK(cudaMemcpyAsync(cb, ca, static_cast<size_t>(bytes / 2), cudaMemcpyDeviceToDevice, s));
        });
        cudaFree(ca);
        cudaFree(cb);
        const double copy_gbs = static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
        for (const ImplDef& impl : op->impls) {
          if (impl.requires_.device_kind != DeviceKind::kCuda) continue;
          if (impl.requires_.RejectDevice(dev) || impl.requires_.RejectRequest(ctx)) continue;
          // The bench waits for the stream itself: checks that need the
          // stream done (the attention ops' index flag) run after the timed
          // runs, as the daemon's worker runs them after its wait.
          bool failed = false;
          ctx.defer_checks = true;
          std::vector<std::function<Status()>> checks;
          const double ms = MedianMs(s, reps, flush, flush_bytes, [&] {
            if (!impl.fn(ctx).ok()) failed = true;
            if (ctx.deferred) checks.push_back(std::exchange(ctx.deferred, nullptr));
          });
          CK(cudaStreamSynchronize(s));
          for (auto& check : checks)
            if (!check().ok()) failed = true;
          checks.clear();
          const double gbs = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
          char tflops[48] = "";
          if (flops > 0) std::snprintf(tflops, sizeof tflops, "  %.1f TFLOP/s", flops / ms / 1e9);
          std::printf("%-22s %-9s %-7s %-8s %10.1f %10.0f %10.0f %8.2f%s%s\n", op->name.c_str(),
                      std::string(DTypeName(dt)).c_str(), ss.name.c_str(), impl.backend.c_str(),
                      ms * 1e3, gbs, copy_gbs, gbs / copy_gbs, tflops,
                      failed ? "  (impl returned an error)" : "");
          std::string ins, attrs;
          for (size_t i = 0; i < op->inputs.size(); ++i)
            ins += (i ? "," : "") + std::string("\"") + op->inputs[i].name +
                   "\":" + dims(ctx.inputs[i].shape);
          for (const auto& [name, v] : op->bench.attrs)
            if (const double* f = std::get_if<double>(&v))
              attrs += (attrs.empty() ? "" : ",") + std::string("\"") + name +
                       "\":" + std::to_string(*f);
            else if (const bool* on = std::get_if<bool>(&v))
              attrs += (attrs.empty() ? "" : ",") + std::string("\"") + name +
                       "\":" + (*on ? "true" : "false");
          char num[160];
          std::snprintf(num, sizeof num,
                        "\"us\":%.4f,\"copy_us\":%.4f,\"bytes\":%lld,\"flops\":%.6g", ms * 1e3,
                        copy_ms * 1e3, static_cast<long long>(bytes), flops);
          std::string index;
          for (const auto& [name, t] : prob.index) {
            if (t.values.size() > 65536) continue;
            index += (index.empty() ? "\"" : ",\"") + name + "\":[";
            for (size_t j = 0; j < t.values.size(); ++j)
              index += (j ? "," : "") + std::to_string(static_cast<int64_t>(t.values[j]));
            index += "]";
          }
          json += std::string(json.size() > 1 ? ",\n" : "\n") + "{\"op\":\"" + op->name +
                  "\",\"dtype\":\"" + std::string(DTypeName(dt)) + "\",\"shape\":\"" + ss.name +
                  "\",\"impl\":\"" + impl.backend + "\"," + num + ",\"inputs\":{" + ins +
                  "},\"attrs\":{" + attrs + "},\"index\":{" + index + "}}";
        }
      }
    }
  }

  // GEMM: TFLOP/s and the ratio to the cublas impl in the same run.
  const OpDef* gemm = OpRegistry::Global().Find("gemm");
  if (gemm && (only_ops.empty() || only_ops.count("gemm"))) {
    struct G {
      int64_t m, n, k;
      bool tb;
    };
    std::vector<G> shapes = {
        G{8192, 8192, 8192, false}, G{16, 4096, 4096, true},   G{16, 4096, 4096, false},
        G{1, 4096, 4096, true},     G{32, 4096, 4096, true},   G{1, 4096, 4096, false},
        G{32, 4096, 4096, false},   G{16, 14336, 4096, false}, G{16, 4096, 14336, false}};
    if (!gemm_shapes.empty()) {
      shapes.clear();
      for (const std::string& x : gemm_shapes) {
        long long m = 0, n = 0, k = 0;
        char t = 0;
        const int got = std::sscanf(x.c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &t);
        if (got < 3 || m <= 0 || n <= 0 || k <= 0 || (got == 4 && t != 'T')) {
          std::fprintf(stderr, "kernel_bench: --gemm-shapes wants MxNxK or MxNxKT, got '%s'\n",
                       x.c_str());
          return 2;
        }
        shapes.push_back(G{m, n, k, got == 4});
      }
    }
    for (G g : shapes) {
      for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
        if (skip_dtype(dt)) continue;
        DeviceCall call(dev, s);
        KernelContext& ctx = call.ctx;
        call.Input(0, dt, {g.m, g.k}, -1, 1, 11);
        call.Input(1, dt, g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, -1, 1, 12);
        if (!call.Prepare(*gemm, {{"transpose_b", g.tb}}).ok()) {
          std::printf("gemm: %lldx%lldx%lld does not validate\n", static_cast<long long>(g.m),
                      static_cast<long long>(g.n), static_cast<long long>(g.k));
          continue;
        }
        const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
        std::map<std::string, double> ms;
        for (const ImplDef& impl : gemm->impls) {
          if (impl.requires_.device_kind != DeviceKind::kCuda) continue;
          if (impl.requires_.RejectDevice(dev) || impl.requires_.RejectRequest(ctx)) continue;
          bool failed = false;
          const double t = MedianMs(s, g.m >= 4096 ? 10 : reps, flush, flush_bytes, [&] {
            if (!failed) {
              Status st = impl.fn(ctx);
              if (!st.ok())
                failed = true,
                std::printf("gemm %s: %s\n", impl.backend.c_str(), st.ToString().c_str());
            }
          });
          if (!failed) ms[impl.backend] = t;  // a failed launch takes no time: never report it
        }
        const double ref = ms.count("cublas") ? ms["cublas"] : 0;
        // The floor for reading b: one kernel that does only that, in the
        // same run (a and c add under 1% at the built-in decode shapes; not
        // counted, so with --gemm-shapes of small K or N it is b's floor only).
        const double read_ms = g.m >= 4096 ? 0 : MedianMs(s, reps, flush, flush_bytes, [&] {
          ReadBytes(s, b.data, static_cast<size_t>(b.nbytes()));
        });
        for (const auto& [backend, t] : ms) {
          const double tflops = 2.0 * static_cast<double>(g.m * g.n * g.k) / (t * 1e-3) / 1e12;
          const double gbs =
              static_cast<double>(a.nbytes() + b.nbytes() + c.nbytes()) / (t * 1e-3) / 1e9;
          char shape[64];
          std::snprintf(shape, sizeof shape, "%lldx%lldx%lld%s", static_cast<long long>(g.m),
                        static_cast<long long>(g.n), static_cast<long long>(g.k), g.tb ? "T" : "");
          std::printf("%-22s %-9s %-16s %-8s %10.1f us %8.1f TFLOP/s %7.0f GB/s  vs cublas %.2f",
                      "gemm", std::string(DTypeName(dt)).c_str(), shape, backend.c_str(), t * 1e3,
                      tflops, gbs, ref > 0 ? ref / t : 0.0);
          if (read_ms > 0) std::printf("  vs read(b) %.1f us: %.2f", read_ms * 1e3, read_ms / t);
          std::printf("\n");
        }
      }
    }
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "kernel_bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "%s\n]\n", json.c_str());
    std::fclose(f);
  }
  return 0;
}
