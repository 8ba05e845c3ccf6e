// Variant sweep for issue 17's remaining gaps, on its own: no kerneld
// libraries (its own CMake target; scripts/device_bundle copies it to
// .device/lab). Two ops:
//   rmsnorm (float16, bfloat16; float32 with --dtypes): the production
//     kernel (ops/rmsnorm/cuda.cuh) against variants that differ in threads
//     a row, packs a thread, the occupancy the compiler must allow
//     (__launch_bounds__ min blocks), where the weight is loaded, streaming
//     cache hints, and a persistent form that loads the next row's x before
//     it reduces and writes the current one.
//   add (float16, bfloat16; float32 with --dtypes): the production kernel
//     (ops/add/cuda.cuh) against torch's layout (128-thread blocks, 1-4
//     vectors a thread, loads first, one block per block-work) and wider
//     blocks, hints, a grid-stride form.
//   scale (float16, bfloat16; float32 with --dtypes): production (256
//     threads, one vector a thread) against the add layouts.
//   softmax decode (float16 -> float32, 1-64 rows x 4k-128k): the production
//     plan (per row or cluster split) against rows per block (named
//     barriers, one (max, sum) reduction) and rows split over the whole GPU
//     (every block resident, partials exchanged through global memory);
//     the comment above SmRows / SmSplit names them.
// Each variant is checked against a float64 host reference (hashed random
// inputs, output poisoned with NaN first; large shapes on sampled rows) and
// timed beside a device-to-device copy of the same bytes and beside the
// production kernel: CUDA events, L2 read-flushed before each run, median of
// --reps (kernel_bench's method). One table: shape, variant, us, x copy,
// x current, correct; plus registers, spill bytes and resident blocks/SM.
// A variant wrong at any shape is reported FAILED and not timed again.
//
//   k17_lab [--reps N] [--ops rmsnorm,add,scale,softmax] [--dtypes float16,bfloat16,float32]
//           [--match S] [--skip S]
// (--match / --skip: only / not the variants whose name contains S;
// --dtypes: the rmsnorm and add dtypes, float16,bfloat16 unless given)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_cuda.cuh"
#include "ops/add/cuda.cuh"
#include "ops/rmsnorm/cuda.cuh"
#include "ops/scale/cuda.cuh"
#include "ops/softmax/cuda.cuh"

namespace kc = kerneld::cuda;

namespace {

// ---------------------------------------------------------------- harness

int g_sms = 1;
unsigned* g_sink = nullptr;
void* g_flush = nullptr;
size_t g_flush_bytes = 0;

template <typename F>
double MedianUs(cudaStream_t s, int reps, F&& f) {
  return kerneld::bench::FlushedMedianUs(s, reps, {g_flush, g_flush_bytes, g_sms, g_sink}, f);
}

__host__ __device__ inline uint32_t Hash(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ static_cast<uint32_t>(i >> 32) ^ seed;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// Uniform in [lo, hi) from a hash of the index: any values will do, the host
// reads the inputs of the rows it checks back from the device.
template <typename T>
__global__ void Fill(T* p, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u =
        static_cast<float>(Hash(static_cast<uint64_t>(i), seed) >> 8) * (1.0f / 16777216.0f);
    p[i] = kc::FromFloat<T>(lo + (hi - lo) * u);
  }
}

template <typename T>
void FillDev(T* p, int64_t n, uint32_t seed, float lo, float hi, cudaStream_t s) {
  Fill<T><<<4 * g_sms, 256, 0, s>>>(p, n, seed, lo, hi);
  CK(cudaGetLastError());
}

template <typename T>
double HostF(T v);
template <>
double HostF<__half>(__half v) {
  return static_cast<double>(__half2float(v));
}
template <>
double HostF<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}
template <>
double HostF<float>(float v) {
  return static_cast<double>(v);
}

template <typename T>
const char* DName();
template <>
const char* DName<__half>() {
  return "float16";
}
template <>
const char* DName<__nv_bfloat16>() {
  return "bfloat16";
}
template <>
const char* DName<float>() {
  return "float32";
}

// One ulp of the output near 1 (relative), and an absolute floor for values
// near zero: the reference is exact, the kernel rounds once (<= 0.5 ulp)
// after float32 arithmetic. float32 outputs: the float32 sum of squares
// and rsqrtf, well inside 1e-4.
template <typename T>
double RelTol() {
  if constexpr (std::is_same_v<T, float>) return 1e-4;
  return std::is_same_v<T, __half> ? 1.0 / 1024 : 1.0 / 128;
}
template <typename T>
double AbsTol() {
  return std::is_same_v<T, __half> ? 1e-4 : 1e-6;
}

struct FuncInfo {
  int regs = 0;
  int spill = 0;
  int occ = 0;  // resident blocks an SM
};

template <typename K>
FuncInfo Info(K kernel, int threads) {
  FuncInfo fi;
  cudaFuncAttributes a{};
  CK(cudaFuncGetAttributes(&a, kernel));
  fi.regs = a.numRegs;
  fi.spill = static_cast<int>(a.localSizeBytes);
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fi.occ, kernel, threads, 0));
  return fi;
}

// A variant's launch refused (configuration, shared memory): reported and
// skipped, not fatal, so that one bad candidate does not end the sweep.
bool LaunchOk() {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return true;
  std::printf("  launch refused: %s\n", cudaGetErrorString(e));
  return false;
}

// --match / --skip: variant names containing the substring (production
// and copy always run).
std::string g_match, g_skip;
bool Selected(const char* name) {
  const std::string n = name;
  if (!g_match.empty() && n.find(g_match) == std::string::npos) return false;
  if (!g_skip.empty() && n.find(g_skip) != std::string::npos) return false;
  return true;
}

void PrintHeader() {
  std::printf("%-8s %-9s %-12s %-26s %10s %8s %8s %-7s %s\n", "op", "dtype", "shape", "variant",
              "us", "x copy", "x cur", "correct", "regs/spill/blk-per-SM");
}

// Every timed row, for the summary at the end; correctness-only rows count
// into g_checked / g_failed and print nothing unless they fail.
struct Record {
  std::string op, dt, shape, variant;
  double us, copy_us, cur_us;
  bool ok;
};
std::vector<Record> g_records;
int g_checked = 0;
int g_failed = 0;
bool g_timed = false;

void PrintRow(const char* op, const char* dt, const std::string& shape, const std::string& variant,
              double us, double copy_us, double cur_us, const char* correct, const FuncInfo* fi) {
  if (!g_timed) {
    if (correct[0] == '-') return;
    ++g_checked;
    if (correct[0] == 'y') return;
    ++g_failed;
    std::printf("FAILED: %s %s %s %s\n", op, dt, shape.c_str(), variant.c_str());
    return;
  }
  g_records.push_back({op, dt, shape, variant, us, copy_us, cur_us, correct[0] != 'N'});
  char extra[64] = "";
  if (fi) std::snprintf(extra, sizeof extra, "%d/%d/%d", fi->regs, fi->spill, fi->occ);
  std::printf("%-8s %-9s %-12s %-26s %10.2f %8.3f %8.3f %-7s %s\n", op, dt, shape.c_str(),
              variant.c_str(), us, copy_us / us, cur_us > 0 ? cur_us / us : 0.0, correct, extra);
  std::fflush(stdout);
}

// Per op, dtype and shape: copy, current, and the three fastest correct
// variants (us, x copy, x current). Short enough for a device call's tail.
void PrintSummary() {
  std::printf(
      "\n== summary: current and the 3 fastest correct variants (us / x copy / x cur) ==\n");
  for (size_t i = 0; i < g_records.size();) {
    size_t j = i;
    while (j < g_records.size() && g_records[j].op == g_records[i].op &&
           g_records[j].dt == g_records[i].dt && g_records[j].shape == g_records[i].shape)
      ++j;
    std::vector<const Record*> vars;
    const Record* cur = nullptr;
    for (size_t k = i; k < j; ++k) {
      const Record& r = g_records[k];
      if (r.variant == "current")
        cur = &r;
      else if (r.variant != "copy" && r.ok)
        vars.push_back(&r);
    }
    std::sort(vars.begin(), vars.end(),
              [](const Record* a, const Record* b) { return a->us < b->us; });
    const Record& f = g_records[i];
    std::printf("%-7s %-8s %-11s copy %.2f | cur %.2f %.3f%s", f.op.c_str(), f.dt.c_str(),
                f.shape.c_str(), f.copy_us, cur ? cur->us : 0.0, cur ? f.copy_us / cur->us : 0.0,
                cur && !cur->ok ? " WRONG" : "");
    for (size_t k = 0; k < vars.size() && k < 3; ++k)
      std::printf(" | %s %.2f %.3f %.3f", vars[k]->variant.c_str(), vars[k]->us,
                  vars[k]->copy_us / vars[k]->us, vars[k]->cur_us / vars[k]->us);
    std::printf("\n");
    i = j;
  }
}

// A variant whose output is wrong at any shape (tails or timed) is reported
// FAILED and not timed again, at that or any later shape.
std::vector<std::string> g_failed_names;
std::string FailKey(const char* op, const char* dt, const char* name) {
  return std::string(op) + "|" + dt + "|" + name;
}
bool Failed(const char* op, const char* dt, const char* name) {
  return std::find(g_failed_names.begin(), g_failed_names.end(), FailKey(op, dt, name)) !=
         g_failed_names.end();
}
void MarkFailed(const char* op, const char* dt, const std::string& shape, const char* name,
                int64_t bad, double max_err) {
  ++g_checked;
  ++g_failed;
  g_failed_names.push_back(FailKey(op, dt, name));
  std::printf("FAILED: %s %s %s %s (%lld bad elements, max err %g): not timed\n", op, dt,
              shape.c_str(), name, static_cast<long long>(bad), max_err);
  std::fflush(stdout);
}

// One machine-readable line a timed shape, as soon as its variants ran (a
// later fault in the process does not lose it); bench/k17_lab_pass.sh merges
// the parts' lines into its final table:
//   BEST op dtype shape copy_us cur_us best_us best_name...
void EmitBest(const char* op, const char* dt, const std::string& shape) {
  const Record* cur = nullptr;
  const Record* best = nullptr;
  double copy_us = 0;
  for (const Record& r : g_records) {
    if (r.op != op || r.dt != dt || r.shape != shape) continue;
    copy_us = r.copy_us;
    if (r.variant == "current")
      cur = &r;
    else if (r.variant != "copy" && r.ok && (!best || r.us < best->us))
      best = &r;
  }
  std::printf("BEST %s %s %s %.3f %.3f %.3f %s\n", op, dt, shape.c_str(), copy_us,
              cur && cur->ok ? cur->us : 0.0, best ? best->us : 0.0,
              best ? best->variant.c_str() : "-");
  std::fflush(stdout);
}

// ---------------------------------------------------------------- rmsnorm variants

using kc::FromFloat;
using kc::Pack;
using kc::ToFloat;
using kc::WarpSum;

enum RmsFlags : int {
  kWEarly = 1,   // the weight pack is loaded with x, before the reduction
  kHint = 2,     // x loaded ld.global.cs, y stored st.global.cs (streaming)
  kPersist = 4,  // grid = resident blocks; the next row's x loads before this row reduces
  kWReg = 8,     // persistent: the weight is loaded once into registers
};

template <bool kH, typename P>
__device__ __forceinline__ P Ld(const P* p) {
  if constexpr (kH && sizeof(P) == 16) {
    const uint4 u = __ldcs(reinterpret_cast<const uint4*>(p));
    P r;
    memcpy(&r, &u, 16);
    return r;
  } else {
    return *p;
  }
}

template <bool kH, typename P>
__device__ __forceinline__ void St(P* p, const P& v) {
  if constexpr (kH && sizeof(P) == 16) {
    uint4 u;
    memcpy(&u, &v, 16);
    __stcs(reinterpret_cast<uint4*>(p), u);
  } else {
    *p = v;
  }
}

// Block sum with kThreads known: one __syncthreads a row instead of
// RowSum's two. The scratch alternates between two halves by row parity: a
// warp can only write a half again after every warp passed the barrier of
// the row in between, i.e. after every warp read it.
template <int kThreads>
__device__ __forceinline__ float BlockSum(float v, float* scratch, int parity) {
  v = WarpSum(v);
  if constexpr (kThreads == 32) {
    return v;
  } else {
    float* s = scratch + parity * 32;
    const int lane = threadIdx.x & 31;
    if (lane == 0) s[threadIdx.x >> 5] = v;
    __syncthreads();
    v = lane < kThreads / 32 ? s[lane] : 0.0f;
    return WarpSum(v);
  }
}

template <typename T, int N, int kThreads, int kItems, int kMinB, int kFl>
__global__ void __launch_bounds__(kThreads, kMinB)
    RmsVar(const T* x, const T* __restrict__ w, T* y, int64_t rows, int units, float eps,
           float bias) {
  using P = Pack<T, N>;
  constexpr bool kH = (kFl & kHint) != 0;
  __shared__ float scratch[64];
  const float h = static_cast<float>(units) * N;
  const P* xp = reinterpret_cast<const P*>(x);
  const P* wp = reinterpret_cast<const P*>(w);
  P* yp = reinterpret_cast<P*>(y);
  int parity = 0;
  if constexpr ((kFl & kPersist) == 0) {
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
      const int64_t base = row * units;
      P c[kItems], wv[kItems];
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) {
          c[k] = Ld<kH>(xp + base + u);
          if constexpr ((kFl & kWEarly) != 0) wv[k] = wp[u];
        }
      }
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        if (threadIdx.x + k * kThreads < units) {
#pragma unroll
          for (int j = 0; j < N; ++j) ss += ToFloat(c[k].v[j]) * ToFloat(c[k].v[j]);
        }
      }
      const float scale = rsqrtf(BlockSum<kThreads>(ss, scratch, parity) / h + eps);
      parity ^= 1;
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) {
          if constexpr ((kFl & kWEarly) == 0) wv[k] = wp[u];
          P o;
#pragma unroll
          for (int j = 0; j < N; ++j)
            o.v[j] = FromFloat<T>(ToFloat(c[k].v[j]) * scale * (ToFloat(wv[k].v[j]) + bias));
          St<kH>(yp + base + u, o);
        }
      }
    }
  } else {
    constexpr bool kWr = (kFl & kWReg) != 0;
    P wv[kItems];
    if constexpr (kWr) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) wv[k] = wp[u];
      }
    }
    P c[kItems];
    int64_t row = blockIdx.x;
    if (row < rows) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) c[k] = Ld<kH>(xp + row * units + u);
      }
    }
    for (; row < rows; row += gridDim.x) {
      const int64_t next = row + gridDim.x;
      P n[kItems];
      if (next < rows) {
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          const int u = threadIdx.x + k * kThreads;
          if (u < units) n[k] = Ld<kH>(xp + next * units + u);
        }
      }
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        if (threadIdx.x + k * kThreads < units) {
#pragma unroll
          for (int j = 0; j < N; ++j) ss += ToFloat(c[k].v[j]) * ToFloat(c[k].v[j]);
        }
      }
      const float scale = rsqrtf(BlockSum<kThreads>(ss, scratch, parity) / h + eps);
      parity ^= 1;
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) {
          if constexpr (!kWr) wv[k] = wp[u];
          P o;
#pragma unroll
          for (int j = 0; j < N; ++j)
            o.v[j] = FromFloat<T>(ToFloat(c[k].v[j]) * scale * (ToFloat(wv[k].v[j]) + bias));
          St<kH>(yp + row * units + u, o);
        }
      }
#pragma unroll
      for (int k = 0; k < kItems; ++k) c[k] = n[k];
    }
  }
}

struct RmsResult {
  bool applies = false;
  FuncInfo fi;
};

// Launches the variant (vector path when rows are 16-byte aligned, else one
// element a pack, as production does); applies=false when a row does not fit
// kThreads x kItems packs.
template <typename T, int kThreads, int kItems, int kMinB, int kFl>
RmsResult RmsRun(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, float eps,
                 cudaStream_t s) {
  RmsResult r;
  auto go = [&](auto n_tag) {
    constexpr int N = decltype(n_tag)::value;
    const int64_t units = hidden / N;
    if (units > int64_t{kThreads} * kItems) return;
    auto kern = RmsVar<T, N, kThreads, kItems, kMinB, kFl>;
    // Queried once: inside the timed region the host calls would delay the
    // launch and the gap would count.
    static const FuncInfo fi = Info(kern, kThreads);
    r.applies = true;
    r.fi = fi;
    int64_t grid = rows;
    if constexpr ((kFl & kPersist) != 0) grid = std::min<int64_t>(rows, int64_t{r.fi.occ} * g_sms);
    grid = std::clamp<int64_t>(grid, 1, 0x7fffffff);
    kern<<<static_cast<unsigned>(grid), kThreads, 0, s>>>(x, w, y, rows, static_cast<int>(units),
                                                          eps, 0.0f);
    r.applies = LaunchOk();
  };
  if (kc::VectorRowsOk<T>(hidden, {x, w, y}))
    go(std::integral_constant<int, kc::kVecN<T>>{});
  else
    go(std::integral_constant<int, 1>{});
  return r;
}

// Persistent, x staged through shared memory by cp.async kStages rows ahead:
// registers bound the bytes a thread keeps in flight to its row packs
// (rmsnorm mid: 16 bytes a thread, 4 rows an SM); shared memory holds
// kStages rows a block. Each thread copies and later reads only its own
// packs, so the stages need no barrier; one cp.async group is committed a
// row (empty past the end) so that wait_prior(kStages - 1) is always the
// current row. The weight stays in registers. Vector path only.
template <typename T, int kThreads, int kItems, int kStages, int kMinB>
__global__ void __launch_bounds__(kThreads, kMinB)
    RmsPipe(const T* x, const T* __restrict__ w, T* y, int64_t rows, int units, float eps,
            float bias) {
  constexpr int N = kc::kVecN<T>;
  using P = Pack<T, N>;
  extern __shared__ uint4 stage_buf[];  // [kStages][kItems][kThreads]
  __shared__ float scratch[64];
  const float h = static_cast<float>(units) * N;
  const P* xp = reinterpret_cast<const P*>(x);
  const P* wp = reinterpret_cast<const P*>(w);
  P* yp = reinterpret_cast<P*>(y);
  P wv[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int u = threadIdx.x + k * kThreads;
    if (u < units) wv[k] = wp[u];
  }
  const auto issue = [&](int64_t row, int st) {
    if (row < rows) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units)
          __pipeline_memcpy_async(&stage_buf[(st * kItems + k) * kThreads + threadIdx.x],
                                  xp + row * units + u, 16);
      }
    }
    __pipeline_commit();
  };
  int64_t row = blockIdx.x;
#pragma unroll
  for (int st = 0; st < kStages; ++st) issue(row + int64_t{st} * gridDim.x, st);
  int st = 0;
  int parity = 0;
  for (; row < rows; row += gridDim.x) {
    __pipeline_wait_prior(kStages - 1);
    P c[kItems];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (threadIdx.x + k * kThreads < units) {
        memcpy(&c[k], &stage_buf[(st * kItems + k) * kThreads + threadIdx.x], 16);
#pragma unroll
        for (int j = 0; j < N; ++j) ss += ToFloat(c[k].v[j]) * ToFloat(c[k].v[j]);
      }
    }
    // The stage is in registers: refill it with the row kStages ahead.
    issue(row + int64_t{kStages} * gridDim.x, st);
    st = st + 1 == kStages ? 0 : st + 1;
    const float scale = rsqrtf(BlockSum<kThreads>(ss, scratch, parity) / h + eps);
    parity ^= 1;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * kThreads;
      if (u < units) {
        P o;
#pragma unroll
        for (int j = 0; j < N; ++j)
          o.v[j] = FromFloat<T>(ToFloat(c[k].v[j]) * scale * (ToFloat(wv[k].v[j]) + bias));
        yp[row * units + u] = o;
      }
    }
  }
  __pipeline_wait_prior(0);  // no copy outlives the block
}

template <typename T, int kThreads, int kItems, int kStages, int kMinB>
RmsResult PipeRun(const T* x, const T* w, T* y, int64_t rows, int64_t hidden, float eps,
                  cudaStream_t s) {
  RmsResult r;
  constexpr int N = kc::kVecN<T>;
  if (!kc::VectorRowsOk<T>(hidden, {x, w, y})) return r;
  const int64_t units = hidden / N;
  if (units > int64_t{kThreads} * kItems) return r;
  auto kern = RmsPipe<T, kThreads, kItems, kStages, kMinB>;
  constexpr int kSmem = kStages * kItems * kThreads * 16;
  // Queried once (see RmsRun); past 48 KiB dynamic shared memory must be
  // allowed first.
  static const FuncInfo fi = [&] {
    (void)cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    (void)LaunchOk();  // a refusal shows as the launch's error below
    FuncInfo f = Info(kern, kThreads);
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f.occ, kern, kThreads, kSmem));
    return f;
  }();
  r.applies = true;
  r.fi = fi;
  const int64_t grid =
      std::clamp<int64_t>(std::min<int64_t>(rows, int64_t{fi.occ} * g_sms), 1, 0x7fffffff);
  kern<<<static_cast<unsigned>(grid), kThreads, kSmem, s>>>(x, w, y, rows, static_cast<int>(units),
                                                            eps, 0.0f);
  r.applies = LaunchOk();
  return r;
}

template <typename T>
struct RmsVariant {
  const char* name;
  RmsResult (*fn)(const T*, const T*, T*, int64_t, int64_t, float, cudaStream_t);
};

// Name: t<threads a row>i<packs a thread>b<min blocks>, then w (weight
// early), h (hints), P (persistent, prefetch), R (weight in registers).
#define RV(TH, IT, MB, FL, NAME) \
  RmsVariant<T> { NAME, &RmsRun<T, TH, IT, MB, FL> }
// cp.async pipeline: t<threads>i<packs>s<stages>b<min blocks>.
#define PV(TH, IT, ST, MB, NAME) \
  RmsVariant<T> { NAME, &PipeRun<T, TH, IT, ST, MB> }

template <typename T>
std::vector<RmsVariant<T>> RmsVariants() {
  return {
      // hidden 4096 (512 packs) and less
      RV(512, 1, 4, kWEarly, "t512i1b4 w"),
      RV(512, 1, 1, kWEarly, "t512i1b1 w"),
      RV(512, 1, 4, kWEarly | kHint, "t512i1b4 wh"),
      RV(256, 2, 8, kWEarly, "t256i2b8 w"),
      RV(256, 2, 4, kWEarly, "t256i2b4 w"),
      RV(256, 2, 8, kWEarly | kHint, "t256i2b8 wh"),
      RV(128, 4, 8, 0, "t128i4b8"),
      RV(128, 4, 8, kWEarly, "t128i4b8 w"),
      RV(512, 1, 2, kPersist | kWReg, "t512i1b2 PR"),
      RV(512, 1, 4, kPersist | kWReg, "t512i1b4 PR"),
      RV(256, 2, 4, kPersist | kWReg, "t256i2b4 PR"),
      RV(256, 2, 4, kPersist | kWReg | kHint, "t256i2b4 PRh"),
      RV(128, 4, 4, kPersist, "t128i4b4 P"),
      // hidden 8192 (1024 packs)
      RV(1024, 1, 2, kWEarly, "t1024i1b2 w"),
      RV(512, 2, 4, kWEarly, "t512i2b4 w"),
      RV(512, 2, 2, kWEarly, "t512i2b2 w"),
      RV(256, 4, 4, 0, "t256i4b4"),
      RV(256, 4, 4, kHint, "t256i4b4 h"),
      RV(128, 8, 4, 0, "t128i8b4"),
      RV(1024, 1, 1, kPersist | kWReg, "t1024i1b1 PR"),
      RV(512, 2, 2, kPersist | kWReg, "t512i2b2 PR"),
      RV(256, 4, 2, kPersist, "t256i4b2 P"),
      // cp.async pipelines, hidden 4096
      PV(512, 1, 2, 4, "pipe t512i1s2b4"),
      PV(512, 1, 4, 4, "pipe t512i1s4b4"),
      PV(512, 1, 6, 2, "pipe t512i1s6b2"),
      PV(256, 2, 4, 4, "pipe t256i2s4b4"),
      PV(128, 4, 4, 8, "pipe t128i4s4b8"),
      // hidden 8192
      PV(1024, 1, 2, 2, "pipe t1024i1s2b2"),
      PV(1024, 1, 3, 1, "pipe t1024i1s3b1"),
      PV(512, 2, 3, 2, "pipe t512i2s3b2"),
      PV(256, 4, 3, 4, "pipe t256i4s3b4"),
  };
}
#undef RV
#undef PV

// float64 reference of the rows in `check` (from the device's inputs);
// returns the number of elements out of tolerance (NaN counts).
template <typename T>
int64_t RmsCheck(const T* dx, const T* dw, const T* dy, int64_t rows, int64_t hidden, float eps,
                 const std::vector<int64_t>& check, double* max_err) {
  std::vector<T> hx(static_cast<size_t>(hidden)), hy(static_cast<size_t>(hidden)),
      hw(static_cast<size_t>(hidden));
  CK(cudaMemcpy(hw.data(), dw, hidden * sizeof(T), cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int64_t r : check) {
    if (r >= rows) continue;
    CK(cudaMemcpy(hx.data(), dx + r * hidden, hidden * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), dy + r * hidden, hidden * sizeof(T), cudaMemcpyDeviceToHost));
    double ss = 0;
    for (int64_t j = 0; j < hidden; ++j) ss += HostF(hx[j]) * HostF(hx[j]);
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(hidden) + eps);
    for (int64_t j = 0; j < hidden; ++j) {
      const double ref = HostF(hx[j]) * scale * HostF(hw[j]);
      const double got = HostF(hy[j]);
      const double err = std::fabs(got - ref);
      if (!(err <= RelTol<T>() * std::fabs(ref) + AbsTol<T>())) ++bad;
      if (!(err <= *max_err)) *max_err = std::isnan(err) ? INFINITY : err;
    }
  }
  return bad;
}

std::vector<int64_t> RowsToCheck(int64_t rows) {
  std::vector<int64_t> v;
  if (rows <= 256) {
    for (int64_t r = 0; r < rows; ++r) v.push_back(r);
    return v;
  }
  for (int64_t r = 0; r < 48; ++r) v.push_back(r);
  for (int64_t r = rows - 48; r < rows; ++r) v.push_back(r);
  for (int64_t r = 48; r < rows - 48; r += std::max<int64_t>(1, rows / 160)) v.push_back(r);
  return v;
}

template <typename T>
void RunRms(cudaStream_t s, int reps, const std::vector<std::pair<int64_t, int64_t>>& shapes,
            bool timed) {
  const float eps = 1e-6f;
  const auto vars = RmsVariants<T>();
  for (auto [rows, hidden] : shapes) {
    const int64_t n = rows * hidden;
    T *x, *w, *y;
    CK(cudaMalloc(&x, n * sizeof(T)));
    CK(cudaMalloc(&y, n * sizeof(T)));
    CK(cudaMalloc(&w, hidden * sizeof(T)));
    FillDev(x, n, 1u, -2.0f, 2.0f, s);
    FillDev(w, hidden, 2u, 0.5f, 1.5f, s);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(hidden);
    const auto check = RowsToCheck(rows);
    double copy_us = 0;
    const size_t bytes = (2 * static_cast<size_t>(n) + hidden) * sizeof(T);
    void *ca = nullptr, *cb = nullptr;
    if (timed) {
      CK(cudaMalloc(&ca, bytes / 2));
      CK(cudaMalloc(&cb, bytes / 2));
      copy_us = MedianUs(
          s, reps, [&] { CK(cudaMemcpyAsync(cb, ca, bytes / 2, cudaMemcpyDeviceToDevice, s)); });
      PrintRow("rmsnorm", DName<T>(), shape, "copy", copy_us, copy_us, 0, "-", nullptr);
    }
    // Production first: its time is the "x cur" reference.
    double cur_us = 0;
    {
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(T), s));
      CK((kc::rmsnorm::RmsNorm<T>(x, w, y, rows, hidden, eps, 0.0f, g_sms, s)));
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = RmsCheck(x, w, y, rows, hidden, eps, check, &me);
      if (timed)
        cur_us = MedianUs(s, reps, [&] {
          CK((kc::rmsnorm::RmsNorm<T>(x, w, y, rows, hidden, eps, 0.0f, g_sms, s)));
        });
      PrintRow("rmsnorm", DName<T>(), shape, "current", timed ? cur_us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, bad ? "NO" : "yes", nullptr);
      if (bad)
        std::printf("  current: %lld bad elements, max err %g\n", static_cast<long long>(bad), me);
    }
    for (const auto& v : vars) {
      if (!Selected(v.name)) continue;
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(T), s));
      const RmsResult r = v.fn(x, w, y, rows, hidden, eps, s);
      if (!r.applies) continue;
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = RmsCheck(x, w, y, rows, hidden, eps, check, &me);
      double us = 0;
      if (timed) us = MedianUs(s, reps, [&] { v.fn(x, w, y, rows, hidden, eps, s); });
      PrintRow("rmsnorm", DName<T>(), shape, v.name, timed ? us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, bad ? "NO" : "yes", &r.fi);
      if (bad)
        std::printf("  %s: %lld bad elements, max err %g\n", v.name, static_cast<long long>(bad),
                    me);
    }
    cudaFree(ca);
    cudaFree(cb);
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(w));
  }
}

// ---------------------------------------------------------------- add variants

enum AddFlags : int {
  kAHint = 1,    // ld.global.cs / st.global.cs
  kAStride = 2,  // grid = resident blocks, grid-stride over block-works
};

// torch's vectorized layout: a block covers kThreads x kVecs vectors, vector
// k of a thread at block base + threadIdx.x + k * kThreads; every load of
// the thread is issued before the first add.
template <typename T, int kThreads, int kVecs, int kFl>
__global__ void __launch_bounds__(kThreads)
    AddVar(const kc::Vec16<T>* a, const kc::Vec16<T>* b, kc::Vec16<T>* y, int64_t nvec) {
  using V = kc::Vec16<T>;
  constexpr bool kH = (kFl & kAHint) != 0;
  constexpr int64_t kWork = int64_t{kThreads} * kVecs;
  const int64_t stride = (kFl & kAStride) != 0 ? int64_t{gridDim.x} * kWork : nvec;
  for (int64_t base = blockIdx.x * kWork + threadIdx.x; base < nvec; base += stride) {
    V va[kVecs], vb[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = base + int64_t{k} * kThreads;
      if (i < nvec) {
        va[k] = Ld<kH>(a + i);
        vb[k] = Ld<kH>(b + i);
      }
    }
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = base + int64_t{k} * kThreads;
      if (i < nvec) {
        V o;
#pragma unroll
        for (int j = 0; j < V::kN; ++j)
          o.v[j] = FromFloat<T>(ToFloat(va[k].v[j]) + ToFloat(vb[k].v[j]));
        St<kH>(y + i, o);
      }
    }
  }
}

struct AddResult {
  bool ok = true;
  FuncInfo fi;
};

// Aligned pointers (cudaMalloc): the vector body, then production's scalar
// edge kernel for the n % N tail.
template <typename T, int kThreads, int kVecs, int kFl>
AddResult AddRun(const T* a, const T* b, T* y, int64_t n, cudaStream_t s) {
  using V = kc::Vec16<T>;
  AddResult r;
  const int64_t nvec = n / V::kN;
  auto kern = AddVar<T, kThreads, kVecs, kFl>;
  static const FuncInfo fi = Info(kern, kThreads);  // once: see RmsRun
  r.fi = fi;
  if (nvec > 0) {
    const int64_t work = int64_t{kThreads} * kVecs;
    int64_t grid = (nvec + work - 1) / work;
    if constexpr ((kFl & kAStride) != 0) grid = std::min<int64_t>(grid, int64_t{r.fi.occ} * g_sms);
    kern<<<static_cast<unsigned>(std::clamp<int64_t>(grid, 1, 0x7fffffff)), kThreads, 0, s>>>(
        reinterpret_cast<const V*>(a), reinterpret_cast<const V*>(b), reinterpret_cast<V*>(y),
        nvec);
    r.ok = LaunchOk();
  }
  const int64_t tail = nvec * V::kN;
  if (tail < n) {
    kc::add::AddEdgesKernel<T><<<1, 256, 0, s>>>(a, b, y, 0, tail, n);
    CK(cudaGetLastError());
  }
  return r;
}

template <typename T>
struct AddVariant {
  const char* name;
  AddResult (*fn)(const T*, const T*, T*, int64_t, cudaStream_t);
};

#define AV(TH, VE, FL, NAME) \
  AddVariant<T> { NAME, &AddRun<T, TH, VE, FL> }

// Name: t<threads a block>v<vectors a thread>, h (hints), S (grid-stride).
template <typename T>
std::vector<AddVariant<T>> AddVariants() {
  return {
      AV(64, 1, 0, "t64v1"),
      AV(64, 2, 0, "t64v2"),
      AV(64, 4, 0, "t64v4"),
      AV(128, 1, 0, "t128v1 (torch, vec8 8/thr)"),
      AV(128, 2, 0, "t128v2"),
      AV(128, 4, 0, "t128v4 (torch, unroll 4)"),
      AV(128, 8, 0, "t128v8"),
      AV(256, 1, 0, "t256v1"),
      AV(256, 2, 0, "t256v2"),
      AV(256, 4, 0, "t256v4"),
      AV(512, 1, 0, "t512v1"),
      AV(512, 2, 0, "t512v2"),
      AV(512, 4, 0, "t512v4"),
      AV(128, 4, kAHint, "t128v4 h"),
      AV(256, 2, kAHint, "t256v2 h"),
      AV(256, 4, kAStride, "t256v4 S"),
      AV(128, 4, kAStride, "t128v4 S"),
  };
}
#undef AV

// Element ranges checked: everything up to 4M elements, else the first and
// last 1M and 64 chunks of 4096 between.
std::vector<std::pair<int64_t, int64_t>> RangesToCheck(int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> v;
  const int64_t m = int64_t{1} << 20;
  if (n <= 4 * m) return {{0, n}};
  v.push_back({0, m});
  v.push_back({n - m, m});
  for (int i = 1; i <= 64; ++i) v.push_back({(n - 4096) / 65 * i, 4096});
  return v;
}

template <typename T>
int64_t AddCheck(const T* da, const T* db, const T* dy, int64_t n, double* max_err) {
  int64_t bad = 0;
  std::vector<T> ha, hb, hy;
  for (auto [off, len] : RangesToCheck(n)) {
    ha.resize(static_cast<size_t>(len));
    hb.resize(static_cast<size_t>(len));
    hy.resize(static_cast<size_t>(len));
    CK(cudaMemcpy(ha.data(), da + off, len * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), db + off, len * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), dy + off, len * sizeof(T), cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j < len; ++j) {
      const double ref = HostF(ha[j]) + HostF(hb[j]);
      const double err = std::fabs(HostF(hy[j]) - ref);
      if (!(err <= RelTol<T>() * std::fabs(ref) + AbsTol<T>())) ++bad;
      if (!(err <= *max_err)) *max_err = std::isnan(err) ? INFINITY : err;
    }
  }
  return bad;
}

template <typename T>
void RunAdd(cudaStream_t s, int reps, const std::vector<std::pair<int64_t, int64_t>>& shapes,
            bool timed) {
  const auto vars = AddVariants<T>();
  for (auto [rows, hidden] : shapes) {
    const int64_t n = rows * hidden;
    T *a, *b, *y;
    CK(cudaMalloc(&a, n * sizeof(T)));
    CK(cudaMalloc(&b, n * sizeof(T)));
    CK(cudaMalloc(&y, n * sizeof(T)));
    FillDev(a, n, 3u, -4.0f, 4.0f, s);
    FillDev(b, n, 4u, -4.0f, 4.0f, s);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(hidden);
    const size_t bytes = 3 * static_cast<size_t>(n) * sizeof(T);
    double copy_us = 0;
    void *ca = nullptr, *cb = nullptr;
    if (timed) {
      CK(cudaMalloc(&ca, bytes / 2));
      CK(cudaMalloc(&cb, bytes / 2));
      copy_us = MedianUs(
          s, reps, [&] { CK(cudaMemcpyAsync(cb, ca, bytes / 2, cudaMemcpyDeviceToDevice, s)); });
      PrintRow("add", DName<T>(), shape, "copy", copy_us, copy_us, 0, "-", nullptr);
    }
    double cur_us = 0;
    {
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(T), s));
      CK((kc::add::Add<T>(a, b, y, n, g_sms, s)));
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = AddCheck(a, b, y, n, &me);
      if (timed) cur_us = MedianUs(s, reps, [&] { CK((kc::add::Add<T>(a, b, y, n, g_sms, s))); });
      PrintRow("add", DName<T>(), shape, "current", timed ? cur_us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, bad ? "NO" : "yes", nullptr);
      if (bad)
        std::printf("  current: %lld bad elements, max err %g\n", static_cast<long long>(bad), me);
    }
    for (const auto& v : vars) {
      if (!Selected(v.name) || Failed("add", DName<T>(), v.name)) continue;
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(T), s));
      const AddResult r = v.fn(a, b, y, n, s);
      if (!r.ok) continue;
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = AddCheck(a, b, y, n, &me);
      if (bad) {
        MarkFailed("add", DName<T>(), shape, v.name, bad, me);
        continue;
      }
      double us = 0;
      if (timed) us = MedianUs(s, reps, [&] { v.fn(a, b, y, n, s); });
      PrintRow("add", DName<T>(), shape, v.name, timed ? us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, "yes", &r.fi);
    }
    if (timed) EmitBest("add", DName<T>(), shape);
    cudaFree(ca);
    cudaFree(cb);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(y));
  }
}

// ---------------------------------------------------------------- scale variants

// y = x * f in float32, rounded once: the add layouts (torch's: 128-thread
// blocks, kVecs 16-byte vectors a thread, all loads before the stores, grid
// = ceil(vectors / (threads x kVecs))) beside production's (256 threads, one
// vector a thread).
template <typename T, int kThreads, int kVecs, int kFl>
__global__ void __launch_bounds__(kThreads)
    ScaleVar(const kc::Vec16<T>* __restrict__ x, kc::Vec16<T>* __restrict__ y, int64_t nvec,
             float f) {
  using V = kc::Vec16<T>;
  constexpr bool kH = (kFl & kAHint) != 0;
  constexpr int64_t kWork = int64_t{kThreads} * kVecs;
  const int64_t stride = (kFl & kAStride) != 0 ? int64_t{gridDim.x} * kWork : nvec;
  for (int64_t base = blockIdx.x * kWork + threadIdx.x; base < nvec; base += stride) {
    V va[kVecs];
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = base + int64_t{k} * kThreads;
      if (i < nvec) va[k] = Ld<kH>(x + i);
    }
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = base + int64_t{k} * kThreads;
      if (i < nvec) {
        V o;
#pragma unroll
        for (int j = 0; j < V::kN; ++j) o.v[j] = FromFloat<T>(ToFloat(va[k].v[j]) * f);
        St<kH>(y + i, o);
      }
    }
  }
}

constexpr float kScaleF = 1.7f;

template <typename T, int kThreads, int kVecs, int kFl>
AddResult ScaleRun(const T* x, T* y, int64_t n, cudaStream_t s) {
  using V = kc::Vec16<T>;
  AddResult r;
  const int64_t nvec = n / V::kN;
  auto kern = ScaleVar<T, kThreads, kVecs, kFl>;
  static const FuncInfo fi = Info(kern, kThreads);  // once: see RmsRun
  r.fi = fi;
  if (nvec > 0) {
    const int64_t work = int64_t{kThreads} * kVecs;
    int64_t grid = (nvec + work - 1) / work;
    if constexpr ((kFl & kAStride) != 0) grid = std::min<int64_t>(grid, int64_t{r.fi.occ} * g_sms);
    kern<<<static_cast<unsigned>(std::clamp<int64_t>(grid, 1, 0x7fffffff)), kThreads, 0, s>>>(
        reinterpret_cast<const V*>(x), reinterpret_cast<V*>(y), nvec, kScaleF);
    r.ok = LaunchOk();
  }
  const int64_t done = nvec * V::kN;
  if (done < n) {
    kc::scale::ScaleScalarKernel<T><<<1, 256, 0, s>>>(x + done, y + done, n - done, kScaleF);
    CK(cudaGetLastError());
  }
  return r;
}

template <typename T>
struct ScaleVariant {
  const char* name;
  AddResult (*fn)(const T*, T*, int64_t, cudaStream_t);
};

#define SV(TH, VE, FL, NAME) \
  ScaleVariant<T> { NAME, &ScaleRun<T, TH, VE, FL> }
template <typename T>
std::vector<ScaleVariant<T>> ScaleVariants() {
  return {
      SV(64, 1, 0, "t64v1"),
      SV(64, 2, 0, "t64v2"),
      SV(128, 1, 0, "t128v1 (torch, vec8 8/thr)"),
      SV(128, 2, 0, "t128v2"),
      SV(128, 4, 0, "t128v4 (torch, unroll 4)"),
      SV(256, 1, 0, "t256v1 (production layout)"),
      SV(256, 2, 0, "t256v2"),
      SV(512, 1, 0, "t512v1"),
      SV(512, 2, 0, "t512v2"),
      SV(128, 2, kAHint, "t128v2 h"),
      SV(128, 4, kAStride, "t128v4 S"),
  };
}
#undef SV

template <typename T>
int64_t ScaleCheck(const T* dx, const T* dy, int64_t n, double* max_err) {
  int64_t bad = 0;
  std::vector<T> hx, hy;
  for (auto [off, len] : RangesToCheck(n)) {
    hx.resize(static_cast<size_t>(len));
    hy.resize(static_cast<size_t>(len));
    CK(cudaMemcpy(hx.data(), dx + off, len * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), dy + off, len * sizeof(T), cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j < len; ++j) {
      const double ref = HostF(hx[j]) * static_cast<double>(kScaleF);
      const double err = std::fabs(HostF(hy[j]) - ref);
      if (!(err <= RelTol<T>() * std::fabs(ref) + AbsTol<T>())) ++bad;
      if (!(err <= *max_err)) *max_err = std::isnan(err) ? INFINITY : err;
    }
  }
  return bad;
}

template <typename T>
void RunScale(cudaStream_t s, int reps, const std::vector<std::pair<int64_t, int64_t>>& shapes,
              bool timed) {
  const auto vars = ScaleVariants<T>();
  for (auto [rows, hidden] : shapes) {
    const int64_t n = rows * hidden;
    T *x, *y;
    CK(cudaMalloc(&x, n * sizeof(T)));
    CK(cudaMalloc(&y, n * sizeof(T)));
    FillDev(x, n, 6u, -4.0f, 4.0f, s);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(hidden);
    const size_t bytes = 2 * static_cast<size_t>(n) * sizeof(T);
    double copy_us = 0;
    void *ca = nullptr, *cb = nullptr;
    if (timed) {
      CK(cudaMalloc(&ca, bytes / 2));
      CK(cudaMalloc(&cb, bytes / 2));
      copy_us = MedianUs(
          s, reps, [&] { CK(cudaMemcpyAsync(cb, ca, bytes / 2, cudaMemcpyDeviceToDevice, s)); });
      PrintRow("scale", DName<T>(), shape, "copy", copy_us, copy_us, 0, "-", nullptr);
    }
    double cur_us = 0;
    {
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(T), s));
      CK((kc::scale::Scale<T>(x, y, n, kScaleF, g_sms, s)));
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = ScaleCheck(x, y, n, &me);
      if (timed)
        cur_us = MedianUs(s, reps, [&] { CK((kc::scale::Scale<T>(x, y, n, kScaleF, g_sms, s))); });
      PrintRow("scale", DName<T>(), shape, "current", timed ? cur_us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, bad ? "NO" : "yes", nullptr);
      if (bad)
        std::printf("  current: %lld bad elements, max err %g\n", static_cast<long long>(bad), me);
    }
    for (const auto& v : vars) {
      if (!Selected(v.name) || Failed("scale", DName<T>(), v.name)) continue;
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(T), s));
      const AddResult r = v.fn(x, y, n, s);
      if (!r.ok) continue;
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = ScaleCheck(x, y, n, &me);
      if (bad) {
        MarkFailed("scale", DName<T>(), shape, v.name, bad, me);
        continue;
      }
      double us = 0;
      if (timed) us = MedianUs(s, reps, [&] { v.fn(x, y, n, s); });
      PrintRow("scale", DName<T>(), shape, v.name, timed ? us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, "yes", &r.fi);
    }
    if (timed) EmitBest("scale", DName<T>(), shape);
    cudaFree(ca);
    cudaFree(cb);
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
}

// ---------------------------------------------------------------- softmax decode variants

// Decode softmax (float16 -> float32) over the whole GPU without clusters:
// a row is split over B blocks (B x rows blocks, all resident at once: the
// grid never exceeds the occupancy, so the spin below cannot deadlock).
// Each block caches its chunk (kItems packs of 4 a thread, 256 threads),
// reduces its (max, sum), publishes it to a global workspace, and waits on
// the row's arrival counter; then every block merges the row's B partials
// and writes its chunk. With 4 blocks an SM every SM reads at once, so the
// read phase has the whole input in flight instead of a cluster's share.
// The counters reset themselves: the last block of a row to pass the merge
// zeroes them, after every block of the row has left the spin.
constexpr int kSmThreads = 256;

template <int kItems>
__global__ void __launch_bounds__(kSmThreads, 4)
    SoftmaxGrid(const __half* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t vocab,
                int blocks_per_row, float scale, float2* ws, int* cnt, int* done) {
  using P = Pack<__half, 4>;
  __shared__ float red_m[kSmThreads / 32], red_s[kSmThreads / 32];
  __shared__ float row_ms[2];
  const int B = blocks_per_row;
  const int64_t row = blockIdx.x / B;
  const int part = blockIdx.x % B;
  const int64_t units = vocab / 4;
  const int64_t first = int64_t{part} * kSmThreads * kItems;  // in packs
  const P* xr = reinterpret_cast<const P*>(x + row * vocab);
  P c[kItems];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = first + threadIdx.x + int64_t{k} * kSmThreads;
    if (u < units) c[k] = xr[u];
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = first + threadIdx.x + int64_t{k} * kSmThreads;
    if (u < units) {
#pragma unroll
      for (int j = 0; j < 4; ++j) m = fmaxf(m, __half2float(c[k].v[j]));
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) red_m[warp] = m;
  __syncthreads();
  m = lane < kSmThreads / 32 ? red_m[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.0f;
  if (m != -INFINITY) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int64_t u = first + threadIdx.x + int64_t{k} * kSmThreads;
      if (u < units) {
#pragma unroll
        for (int j = 0; j < 4; ++j) s += __expf((__half2float(c[k].v[j]) - m) * scale);
      }
    }
  }
  s = WarpSum(s);
  if (lane == 0) red_s[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float bs = 0.0f;
#pragma unroll
    for (int i = 0; i < kSmThreads / 32; ++i) bs += red_s[i];
    __stcg(&ws[row * B + part], make_float2(m, bs));
    __threadfence();
    atomicAdd(&cnt[row], 1);
    while (*reinterpret_cast<volatile int*>(&cnt[row]) < B) {
    }
    __threadfence();
  }
  __syncthreads();
  if (warp == 0) {
    float gm = -INFINITY, gs = 0.0f;
    for (int i = lane; i < B; i += 32) {
      const float2 p = __ldcg(&ws[row * B + i]);
      kc::softmax::Merge(gm, gs, p.x, p.y, scale);
    }
    kc::softmax::WarpMerge(gm, gs, scale);
    if (lane == 0) {
      row_ms[0] = gm;
      row_ms[1] = 1.0f / gs;
      if (atomicAdd(&done[row], 1) == B - 1) {
        cnt[row] = 0;
        done[row] = 0;
      }
    }
  }
  __syncthreads();
  const float gm = row_ms[0], inv = row_ms[1];
  float* yr = y + row * vocab;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = first + threadIdx.x + int64_t{k} * kSmThreads;
    if (u < units) {
      float4 o;
      o.x = __expf((__half2float(c[k].v[0]) - gm) * scale) * inv;
      o.y = __expf((__half2float(c[k].v[1]) - gm) * scale) * inv;
      o.z = __expf((__half2float(c[k].v[2]) - gm) * scale) * inv;
      o.w = __expf((__half2float(c[k].v[3]) - gm) * scale) * inv;
      *reinterpret_cast<float4*>(yr + u * 4) = o;
    }
  }
}

struct SmWorkspace {
  float2* ws = nullptr;
  int* cnt = nullptr;  // [rows] arrivals, then [rows] done
  int64_t max_partials = 0, max_rows = 0;
};
SmWorkspace g_smws;

// kItems packs a thread; 0 when the grid would not be resident at once or
// the rows are not 4-element packs (then not applicable).
template <int kItems>
bool SoftmaxGridRun(const __half* x, float* y, int64_t rows, int64_t vocab, cudaStream_t s,
                    FuncInfo* out) {
  if (vocab % 4 != 0) return false;
  auto kern = SoftmaxGrid<kItems>;
  static const FuncInfo fi = Info(kern, kSmThreads);
  *out = fi;
  const int64_t per_block = int64_t{kSmThreads} * kItems * 4;
  const int64_t B = (vocab + per_block - 1) / per_block;
  if (rows * B > int64_t{fi.occ} * g_sms) return false;  // could deadlock: not all resident
  if (rows * B > g_smws.max_partials || rows > g_smws.max_rows) return false;
  kern<<<static_cast<unsigned>(rows * B), kSmThreads, 0, s>>>(
      x, y, rows, vocab, static_cast<int>(B), 1.0f, g_smws.ws, g_smws.cnt,
      g_smws.cnt + g_smws.max_rows);
  return LaunchOk();
}

// ---------------------------------------------------------------- softmax decode: new variants
//
// Shared by the variants below (float16 -> float32, scale applied inside
// exp as production does):
//  - every load of a thread's chunk is issued before any arithmetic (packs
//    in registers), the thread's max mt is taken, then exp((x - mt) * scale)
//    is computed ONCE and kept in registers with its sum; after the row's
//    (M, S) is known each value is multiplied by exp((mt - M) * scale) / S,
//    so the write phase re-reads nothing ("KeepH" variants keep the raw
//    halves instead and recompute exp in the write phase: half the
//    registers, for shapes whose floats would not fit);
//  - one (max, sum) block reduction instead of production's two (max, then
//    sum; bo::Max and bo::Sum take two __syncthreads each, 4 a row): warps
//    reduce (max by shuffles, then their sums rescaled once and added by
//    shuffles), lane 0 of each warp writes its (m, s) to shared memory, ONE
//    barrier, then every warp reads all the warp partials and reduces them
//    itself, so no second barrier broadcasts the result. "2red" variants do
//    max and sum as two such reductions (2 barriers) for comparison.
//  - split rows ("split ..."): grid = rows x B blocks, block `part` of a row
//    owns packs [part * chunk, (part + 1) * chunk). After its block
//    reduction, thread 0 publishes the block's (m, s) as ONE 64-bit store;
//    the blocks of the row then wait for the row's B partials (spin) and
//    merge them. Two exchanges:
//      C (counter): the partial is a relaxed 64-bit store (m, s as floats),
//        then one red.release.gpu.add on the row's arrival counter; waiters
//        spin with ld.acquire.gpu on the counter until it reaches B, then
//        read the B partials (ld.relaxed.gpu). Counters reset without a
//        memset launch: two sets, picked by the parity of an epoch the host
//        passes (incremented per launch); a launch counts on set epoch & 1
//        and block 0 zeroes set (epoch + 1) & 1, which the previous launch
//        used (finished: same stream) and the next one will use. Needs every
//        launch on a workspace in stream order (no PDL overlap).
//      T (tagged): no counter, no atomic: the 64-bit partial carries a
//        16-bit launch tag (epoch & 0xffff), the block max as float16 bits
//        (exact: it is the max of float16 inputs, scale is applied inside
//        exp) and the sum as float32 bits; waiter lane i polls slot i with
//        ld.relaxed.gpu until its tag is this launch's (a single-copy-atomic
//        64-bit word needs no release/acquire: it publishes only itself).
//        Stale tags are older launches'; the host zeroes the workspace when
//        the 16-bit tag wraps.
//    "aw": every warp waits and merges itself (no __syncthreads after the
//    wait); otherwise warp 0 does and shares (M, S) through shared memory.
//    CO-RESIDENCY: a block that spins waits for the other B - 1 blocks of
//    its row; if one of them cannot be scheduled until a spinning block
//    exits, the kernel deadlocks. The host launches a split only when
//    rows x B <= SMs x (resident blocks an SM for this kernel, from
//    cudaOccupancyMaxActiveBlocksPerMultiprocessor), i.e. the whole grid is
//    one wave on an otherwise idle GPU. That assumes nothing else occupies
//    the SMs (no concurrent kernel from another stream / process, no MPS
//    limit); "coop" launches the same kernel with
//    cudaLaunchCooperativeKernel, which guarantees co-residency (or fails
//    the launch), to measure what that guarantee costs. A spin also traps
//    after ~4M polls instead of hanging.
//    B: "f1" / "f2" pick B so that rows x B is about 1x / 2x the SM count
//    (at least one pack a thread, at most kMax packs a thread); "iK" fixes K
//    packs a thread. chunk is rounded up to 32 packs.
//  - rows per block ("rows t<threads a row>r<rows a block>"): no split; a
//    row's threads synchronize with a named barrier (bar.sync 1 + group) so
//    that groups of one block do not wait for each other.
// Rows whose vocab is not a multiple of 4 use the same kernels with single
// elements (N = 1, 4x the items), as production does.

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ void StRelaxedU64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long LdRelaxedU64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void RedAddRelease(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned LdAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void NamedBar(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// (max, sum) over W lanes (xor groups of W): max by shuffles, then each
// lane's sum rescaled once to the group max and summed by shuffles. A lane
// with m = -inf holds s = 0.
template <int W>
__device__ __forceinline__ void WarpMS(float& m, float& s, float scale) {
  float mw = m;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) mw = fmaxf(mw, __shfl_xor_sync(kFull, mw, o));
  s = m == -INFINITY ? 0.0f : s * __expf((m - mw) * scale);
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
  m = mw;
}

// The fused reduction of a group of kW warps (a block or a row group): one
// barrier (bar_id 0: __syncthreads), every warp ends with the result.
template <int kW>
__device__ __forceinline__ void GroupMS(float& m, float& s, float scale, float2* part, int bar_id) {
  WarpMS<32>(m, s, scale);
  if constexpr (kW > 1) {
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) % kW;
    if (lane == 0) part[w] = make_float2(m, s);
    if (bar_id == 0)
      __syncthreads();
    else
      NamedBar(bar_id, kW * 32);
    const float2 p = lane < kW ? part[lane] : make_float2(-INFINITY, 0.0f);
    m = p.x;
    s = p.y;
    WarpMS<kW>(m, s, scale);
    m = __shfl_sync(kFull, m, 0);
    s = __shfl_sync(kFull, s, 0);
  }
}

template <int kW>
__device__ __forceinline__ float GroupMax(float m, float* part, int bar_id) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
  if constexpr (kW > 1) {
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) % kW;
    if (lane == 0) part[w] = m;
    if (bar_id == 0)
      __syncthreads();
    else
      NamedBar(bar_id, kW * 32);
    m = lane < kW ? part[lane] : -INFINITY;
#pragma unroll
    for (int o = kW / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
    m = __shfl_sync(kFull, m, 0);
  }
  return m;
}

template <int kW>
__device__ __forceinline__ float GroupSum(float s, float* part, int bar_id) {
  s = WarpSum(s);
  if constexpr (kW > 1) {
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) % kW;
    if (lane == 0) part[w] = s;
    if (bar_id == 0)
      __syncthreads();
    else
      NamedBar(bar_id, kW * 32);
    s = lane < kW ? part[lane] : 0.0f;
#pragma unroll
    for (int o = kW / 2; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
    s = __shfl_sync(kFull, s, 0);
  }
  return s;
}

// A thread's packs of one row: packs u = u0 + t + k * kT (k < kMax) below
// u1, all loads first.
template <int N, int kT, int kMax>
struct RowRegs {
  Pack<__half, N> raw[kMax];
  __device__ __forceinline__ void Load(const __half* xrow, int64_t u0, int64_t u1, int t) {
    const Pack<__half, N>* xr = reinterpret_cast<const Pack<__half, N>*>(xrow);
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
      const int64_t u = u0 + t + int64_t{k} * kT;
      if (u < u1) raw[k] = xr[u];
    }
  }
  __device__ __forceinline__ float Max(int64_t u0, int64_t u1, int t) const {
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
      if (u0 + t + int64_t{k} * kT < u1) {
#pragma unroll
        for (int j = 0; j < N; ++j) m = fmaxf(m, __half2float(raw[k].v[j]));
      }
    }
    return m;
  }
  // exp((x - ref) * scale) into v (0 past the end), returns their sum.
  __device__ __forceinline__ float Exp(float (&v)[kMax][N], float ref, float scale, int64_t u0,
                                       int64_t u1, int t) const {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
      const bool in = u0 + t + int64_t{k} * kT < u1;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[k][j] = in && ref != -INFINITY ? __expf((__half2float(raw[k].v[j]) - ref) * scale) : 0.0f;
        s += v[k][j];
      }
    }
    return s;
  }
  // Sum of exp((x - ref) * scale), nothing kept.
  __device__ __forceinline__ float ExpSum(float ref, float scale, int64_t u0, int64_t u1,
                                          int t) const {
    float s = 0.0f;
    if (ref == -INFINITY) return s;
#pragma unroll
    for (int k = 0; k < kMax; ++k) {
      if (u0 + t + int64_t{k} * kT < u1) {
#pragma unroll
        for (int j = 0; j < N; ++j) s += __expf((__half2float(raw[k].v[j]) - ref) * scale);
      }
    }
    return s;
  }
};

template <int N>
__device__ __forceinline__ void StoreN(float* p, const float* v) {
  if constexpr (N == 4)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = v[j];
}

// Writes the chunk: kept exps times f, or (KeepH) exp((x - M) * scale) * f.
template <int N, int kT, int kMax, bool kKeepH>
__device__ __forceinline__ void WriteChunk(float* yrow, const RowRegs<N, kT, kMax>& r,
                                           float (&v)[kMax][N], float M, float f, float scale,
                                           int64_t u0, int64_t u1, int t) {
#pragma unroll
  for (int k = 0; k < kMax; ++k) {
    const int64_t u = u0 + t + int64_t{k} * kT;
    if (u < u1) {
      float o[N];
#pragma unroll
      for (int j = 0; j < N; ++j)
        if constexpr (kKeepH)
          o[j] = __expf((__half2float(r.raw[k].v[j]) - M) * scale) * f;
        else
          o[j] = v[k][j] * f;
      StoreN<N>(yrow + u * N, o);
    }
  }
}

// Rows per block: kRPB rows of kTPR threads each.
template <int N, int kTPR, int kRPB, int kMax, bool kTwoRed>
__global__ void __launch_bounds__(kTPR* kRPB)
    SmRows(const __half* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t vocab,
           float scale) {
  constexpr int kW = kTPR / 32;
  __shared__ float2 part[kRPB][kW];
  __shared__ float part2[kRPB][kW];
  const int group = threadIdx.x / kTPR, t = threadIdx.x % kTPR;
  const int64_t row = int64_t{blockIdx.x} * kRPB + group;
  if (row >= rows) return;  // the whole group: its named barrier is not used
  const int bar = kRPB == 1 ? 0 : 1 + group;
  const int64_t units = vocab / N;
  RowRegs<N, kTPR, kMax> r;
  r.Load(x + row * vocab, 0, units, t);
  float v[kMax][N];
  float mt = r.Max(0, units, t);
  float f, M;
  if constexpr (kTwoRed) {
    M = GroupMax<kW>(mt, reinterpret_cast<float*>(part[group]), bar);
    const float s = r.Exp(v, M, scale, 0, units, t);
    f = 1.0f / GroupSum<kW>(s, part2[group], bar);
  } else {
    float m = mt, s = r.Exp(v, mt, scale, 0, units, t);
    GroupMS<kW>(m, s, scale, part[group], bar);
    M = m;
    f = mt == -INFINITY ? 0.0f : __expf((mt - m) * scale) / s;
  }
  WriteChunk<N, kTPR, kMax, false>(y + row * vocab, r, v, M, f, scale, 0, units, t);
}

enum SmMode : int { kSmCounter = 0, kSmTagged = 1 };
enum SmSplitFlags : int {
  kSmAllWarps = 1,  // every warp waits and merges (no barrier after the wait)
  kSmKeepH = 2,     // raw halves kept, exp recomputed when writing
};

constexpr int kSpinLimit = 1 << 22;

template <int N, int kT, int kMax, int kMode, int kFl>
__global__ void __launch_bounds__(kT)
    SmSplit(const __half* __restrict__ x, float* __restrict__ y, int64_t vocab, int B,
            int64_t chunk, float scale, unsigned long long* ws, unsigned* cnt, int cnt_rows,
            unsigned epoch) {
  constexpr int kW = kT / 32;
  constexpr bool kKeepH = (kFl & kSmKeepH) != 0;
  constexpr bool kAll = (kFl & kSmAllWarps) != 0;
  __shared__ float2 part[kW];
  __shared__ float2 row_ms;
  const int64_t row = blockIdx.x / B;
  const int blk = static_cast<int>(blockIdx.x % B);
  const int64_t units = vocab / N;
  const int64_t u0 = int64_t{blk} * chunk, u1 = min(units, u0 + chunk);
  const int t = threadIdx.x, lane = t & 31;
  RowRegs<N, kT, kMax> r;
  r.Load(x + row * vocab, u0, u1, t);
  if constexpr (kMode == kSmCounter) {
    // Reset the set the next launch counts on (see above).
    if (blockIdx.x == 0)
      for (int i = t; i < cnt_rows; i += kT) cnt[((epoch + 1) & 1) * cnt_rows + i] = 0;
  }
  float v[kMax][N];  // unused (optimized out) with KeepH
  const float mt = r.Max(u0, u1, t);
  float m = mt, s;
  if constexpr (kKeepH)
    s = r.ExpSum(mt, scale, u0, u1, t);
  else
    s = r.Exp(v, mt, scale, u0, u1, t);
  GroupMS<kW>(m, s, scale, part, 0);  // every warp: this block's (m, s)
  if (B > 1) {
    unsigned long long* slots = ws + row * B;
    const unsigned tag = epoch & 0xffffu;
    if (t == 0) {
      if constexpr (kMode == kSmCounter) {
        StRelaxedU64(slots + blk, (static_cast<unsigned long long>(__float_as_uint(m)) << 32) |
                                      __float_as_uint(s));
        RedAddRelease(cnt + (epoch & 1) * cnt_rows + row, 1u);
      } else {
        const unsigned long long mh = __half_as_ushort(__float2half_rn(m));
        StRelaxedU64(slots + blk, (static_cast<unsigned long long>(tag) << 48) | (mh << 32) |
                                      __float_as_uint(s));
      }
    }
    if (kAll || t < 32) {
      float gm = -INFINITY, gs = 0.0f;
      if constexpr (kMode == kSmCounter) {
        const unsigned* c = cnt + (epoch & 1) * cnt_rows + row;
        int spins = 0;
        while (LdAcquire(c) < static_cast<unsigned>(B))
          if (++spins > kSpinLimit) __trap();
        for (int i = lane; i < B; i += 32) {
          const unsigned long long p = LdRelaxedU64(slots + i);
          kc::softmax::Merge(gm, gs, __uint_as_float(static_cast<unsigned>(p >> 32)),
                             __uint_as_float(static_cast<unsigned>(p)), scale);
        }
      } else {
        for (int i = lane; i < B; i += 32) {
          unsigned long long p;
          int spins = 0;
          do {
            p = LdRelaxedU64(slots + i);
            if (++spins > kSpinLimit) __trap();
          } while ((p >> 48) != tag);
          const float pm =
              __half2float(__ushort_as_half(static_cast<unsigned short>((p >> 32) & 0xffffu)));
          kc::softmax::Merge(gm, gs, pm, __uint_as_float(static_cast<unsigned>(p)), scale);
        }
      }
      WarpMS<32>(gm, gs, scale);
      m = gm;
      s = gs;
      if constexpr (!kAll) {
        if (t == 0) row_ms = make_float2(gm, gs);
      }
    }
    if constexpr (!kAll) {
      __syncthreads();
      m = row_ms.x;
      s = row_ms.y;
    }
  }
  const float f = kKeepH ? 1.0f / s : (mt == -INFINITY ? 0.0f : __expf((mt - m) * scale) / s);
  WriteChunk<N, kT, kMax, kKeepH>(y + row * vocab, r, v, m, f, scale, u0, u1, t);
}

// Workspaces of the split variants: one per exchange (a counter workspace's
// partials hold arbitrary bits where the tagged one reads its tag).
struct SplitWs {
  unsigned long long* slots = nullptr;
  unsigned* cnt = nullptr;  // [2][cnt_rows]
  int64_t max_slots = 0;
  int cnt_rows = 0;
  unsigned epoch = 0;  // launches so far
};
SplitWs g_ws_cnt, g_ws_tag;

void SplitWsInit(SplitWs* w, int64_t slots, int rows) {
  w->max_slots = slots;
  w->cnt_rows = rows;
  CK(cudaMalloc(&w->slots, slots * sizeof(unsigned long long)));
  CK(cudaMemset(w->slots, 0, slots * sizeof(unsigned long long)));
  CK(cudaMalloc(&w->cnt, 2 * static_cast<size_t>(rows) * sizeof(unsigned)));
  CK(cudaMemset(w->cnt, 0, 2 * static_cast<size_t>(rows) * sizeof(unsigned)));
}

// Blocks a row: kFill > 0: about kFill x SMs blocks in all; kFill == 0:
// kItems packs (of 4) a thread. Returns false where not applicable.
template <int kT, int kMax, int kMode, int kFl, int kFill, int kItems, bool kCoop>
bool SmSplitRun(const __half* x, float* y, int64_t rows, int64_t vocab, cudaStream_t s,
                FuncInfo* out) {
  auto go = [&](auto n_tag) -> bool {
    constexpr int N = decltype(n_tag)::value;
    constexpr int kM = kMax * (4 / N);
    const int64_t units = vocab / N;
    auto kern = SmSplit<N, kT, kM, kMode, kFl>;
    static const FuncInfo fi = Info(kern, kT);
    *out = fi;
    const int64_t cap = int64_t{kT} * kM;
    int64_t B;
    if constexpr (kFill > 0)
      B = std::min<int64_t>((int64_t{kFill} * g_sms + rows - 1) / rows, (units + kT - 1) / kT);
    else
      B = (units + int64_t{kT} * kItems * (4 / N) - 1) / (int64_t{kT} * kItems * (4 / N));
    B = std::max<int64_t>({B, (units + cap - 1) / cap, 1});
    int64_t chunk = (units + B - 1) / B;
    chunk = std::min(cap, (chunk + 31) / 32 * 32);
    B = (units + chunk - 1) / chunk;
    // Co-residency (see above): the whole grid in one wave, else a spinning
    // block could wait on a block that never starts.
    if (B > 1 && rows * B > int64_t{fi.occ} * g_sms) return false;
    SplitWs& w = kMode == kSmCounter ? g_ws_cnt : g_ws_tag;
    if (rows * B > w.max_slots || rows > w.cnt_rows || rows * B > 0x7fffffff) return false;
    ++w.epoch;
    if (kMode == kSmTagged && (w.epoch & 0xffffu) == 0) {
      // The 16-bit tag wraps: no stale slot may carry the next tags.
      CK(cudaMemsetAsync(w.slots, 0, w.max_slots * sizeof(unsigned long long), s));
      ++w.epoch;
    }
    const unsigned grid = static_cast<unsigned>(rows * B);
    int Bi = static_cast<int>(B);
    float scale = 1.0f;
    if constexpr (kCoop) {
      const __half* ax = x;
      float* ay = y;
      int64_t av = vocab;
      void* args[] = {&ax, &ay, &av, &Bi, &chunk, &scale, &w.slots, &w.cnt, &w.cnt_rows, &w.epoch};
      const cudaError_t e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kern),
                                                        dim3(grid), dim3(kT), args, 0, s);
      if (e != cudaSuccess) {
        --w.epoch;  // not launched: the counter sets stay as they were
        std::printf("  coop launch refused: %s\n", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return false;
      }
      return true;
    } else {
      kern<<<grid, kT, 0, s>>>(x, y, vocab, Bi, chunk, scale, w.slots, w.cnt, w.cnt_rows,
                               w.epoch);
      if (LaunchOk()) return true;
      --w.epoch;  // not launched: the counter sets stay as they were
      return false;
    }
  };
  if (vocab % 4 == 0) return go(std::integral_constant<int, 4>{});
  return go(std::integral_constant<int, 1>{});
}

template <int kTPR, int kRPB, int kMax, bool kTwoRed>
bool SmRowsRun(const __half* x, float* y, int64_t rows, int64_t vocab, cudaStream_t s,
               FuncInfo* out) {
  auto go = [&](auto n_tag) -> bool {
    constexpr int N = decltype(n_tag)::value;
    constexpr int kM = kMax * (4 / N);
    if (vocab / N > int64_t{kTPR} * kM) return false;
    auto kern = SmRows<N, kTPR, kRPB, kM, kTwoRed>;
    static const FuncInfo fi = Info(kern, kTPR * kRPB);
    *out = fi;
    const int64_t grid = (rows + kRPB - 1) / kRPB;
    kern<<<static_cast<unsigned>(std::min<int64_t>(grid, 0x7fffffff)), kTPR * kRPB, 0, s>>>(
        x, y, rows, vocab, 1.0f);
    return LaunchOk();
  };
  if (vocab % 4 == 0) return go(std::integral_constant<int, 4>{});
  return go(std::integral_constant<int, 1>{});
}

struct SmVariant {
  const char* name;
  bool (*fn)(const __half*, float*, int64_t, int64_t, cudaStream_t, FuncInfo*);
};

// Names: see the comment above SmRows / SmSplit. "grid iK" is the first
// grid split (two reductions, a volatile spin on an int counter, a second
// counter for the reset, partials re-read by every warp).
#define SR(TPR, RPB, MAX, TWO, NAME) \
  SmVariant { NAME, &SmRowsRun<TPR, RPB, MAX, TWO> }
#define SS(T, MAX, MODE, FL, FILL, ITEMS, COOP, NAME) \
  SmVariant { NAME, &SmSplitRun<T, MAX, MODE, FL, FILL, ITEMS, COOP> }
std::vector<SmVariant> SmVariants() {
  return {
      // one row a group of threads, no split (rows up to threads x max x 4)
      SR(64, 2, 16, false, "rows t64r2"),
      SR(128, 1, 8, false, "rows t128r1"),
      SR(128, 2, 8, false, "rows t128r2"),
      SR(128, 4, 8, false, "rows t128r4"),
      SR(256, 1, 8, false, "rows t256r1"),
      SR(256, 2, 4, false, "rows t256r2"),
      SR(256, 1, 8, true, "rows t256r1 2red"),
      SR(512, 1, 8, false, "rows t512r1"),
      SR(512, 1, 8, true, "rows t512r1 2red"),
      SR(1024, 1, 4, false, "rows t1024r1"),
      // split rows, tagged 64-bit partials
      SS(128, 16, kSmTagged, 0, 1, 0, false, "splitT t128 f1"),
      SS(128, 16, kSmTagged, 0, 2, 0, false, "splitT t128 f2"),
      SS(256, 16, kSmTagged, 0, 1, 0, false, "splitT t256 f1"),
      SS(256, 16, kSmTagged, 0, 2, 0, false, "splitT t256 f2"),
      SS(256, 16, kSmTagged, kSmAllWarps, 1, 0, false, "splitT t256 f1 aw"),
      SS(256, 16, kSmTagged, kSmAllWarps, 2, 0, false, "splitT t256 f2 aw"),
      SS(256, 16, kSmTagged, 0, 0, 4, false, "splitT t256 i4"),
      SS(256, 16, kSmTagged, 0, 0, 8, false, "splitT t256 i8"),
      SS(512, 16, kSmTagged, 0, 1, 0, false, "splitT t512 f1"),
      SS(512, 16, kSmTagged, kSmAllWarps, 1, 0, false, "splitT t512 f1 aw"),
      SS(256, 16, kSmTagged, 0, 1, 0, true, "splitT t256 f1 coop"),
      SS(256, 32, kSmTagged, kSmKeepH, 1, 0, false, "splitT t256 f1 kh"),
      SS(512, 32, kSmTagged, kSmKeepH, 1, 0, false, "splitT t512 f1 kh"),
      // split rows, counter (release add / acquire spin)
      SS(128, 16, kSmCounter, 0, 1, 0, false, "splitC t128 f1"),
      SS(256, 16, kSmCounter, 0, 1, 0, false, "splitC t256 f1"),
      SS(256, 16, kSmCounter, 0, 2, 0, false, "splitC t256 f2"),
      SS(256, 16, kSmCounter, kSmAllWarps, 1, 0, false, "splitC t256 f1 aw"),
      SS(512, 16, kSmCounter, 0, 1, 0, false, "splitC t512 f1"),
      SS(256, 32, kSmCounter, kSmKeepH, 1, 0, false, "splitC t256 f1 kh"),
      // the first grid split (4a045b3)
      {"grid i1", &SoftmaxGridRun<1>},
      {"grid i4", &SoftmaxGridRun<4>},
      {"grid i8", &SoftmaxGridRun<8>},
      {"grid i16", &SoftmaxGridRun<16>},
  };
}
#undef SR
#undef SS

// float64 softmax of every row; NaN and out-of-tolerance elements count.
int64_t SmCheck(const __half* dx, const float* dy, int64_t rows, int64_t vocab, double* max_err) {
  std::vector<__half> hx(static_cast<size_t>(rows * vocab));
  std::vector<float> hy(static_cast<size_t>(rows * vocab));
  CK(cudaMemcpy(hx.data(), dx, hx.size() * sizeof(__half), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hy.data(), dy, hy.size() * sizeof(float), cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const __half* xr = hx.data() + r * vocab;
    const float* yr = hy.data() + r * vocab;
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < vocab; ++j) m = std::max(m, HostF(xr[j]));
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(HostF(xr[j]) - m);
    for (int64_t j = 0; j < vocab; ++j) {
      const double ref = std::exp(HostF(xr[j]) - m) / sum;
      const double err = std::fabs(static_cast<double>(yr[j]) - ref);
      if (!(err <= 1e-4 * ref + 1e-10)) ++bad;
      if (!(err <= *max_err)) *max_err = std::isnan(err) ? INFINITY : err;
    }
  }
  return bad;
}

void RunSoftmax(cudaStream_t s, int reps, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                bool timed) {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const kc::softmax::DeviceCaps dev{0, prop.major * 10 + prop.minor, prop.multiProcessorCount};
  const auto vars = SmVariants();
  for (auto [rows, vocab] : shapes) {
    const int64_t n = rows * vocab;
    __half* x;
    float* y;
    CK(cudaMalloc(&x, n * sizeof(__half)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    FillDev(x, n, 5u, -8.0f, 8.0f, s);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(vocab);
    const size_t bytes = static_cast<size_t>(n) * 6;
    double copy_us = 0;
    void *ca = nullptr, *cb = nullptr;
    if (timed) {
      CK(cudaMalloc(&ca, bytes / 2));
      CK(cudaMalloc(&cb, bytes / 2));
      copy_us = MedianUs(
          s, reps, [&] { CK(cudaMemcpyAsync(cb, ca, bytes / 2, cudaMemcpyDeviceToDevice, s)); });
      PrintRow("softmax", "f16>f32", shape, "copy", copy_us, copy_us, 0, "-", nullptr);
    }
    double cur_us = 0;
    {
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(float), s));
      CK((kc::softmax::Softmax<__half, float>(x, y, rows, vocab, 1.0f, dev, s)));
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = SmCheck(x, y, rows, vocab, &me);
      if (timed)
        cur_us = MedianUs(s, reps, [&] {
          CK((kc::softmax::Softmax<__half, float>(x, y, rows, vocab, 1.0f, dev, s)));
        });
      PrintRow("softmax", "f16>f32", shape, "current", timed ? cur_us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, bad ? "NO" : "yes", nullptr);
      if (bad)
        std::printf("  current: %lld bad elements, max err %g\n", static_cast<long long>(bad), me);
    }
    for (const auto& v : vars) {
      if (!Selected(v.name) || Failed("softmax", "f16>f32", v.name)) continue;
      CK(cudaMemsetAsync(y, 0xff, n * sizeof(float), s));
      FuncInfo fi;
      if (!v.fn(x, y, rows, vocab, s, &fi)) continue;
      CK(cudaStreamSynchronize(s));
      double me = 0;
      const int64_t bad = SmCheck(x, y, rows, vocab, &me);
      if (bad) {
        MarkFailed("softmax", "f16>f32", shape, v.name, bad, me);
        continue;
      }
      double us = 0;
      if (timed) us = MedianUs(s, reps, [&] { v.fn(x, y, rows, vocab, s, &fi); });
      PrintRow("softmax", "f16>f32", shape, v.name, timed ? us : 1, timed ? copy_us : 1,
               timed ? cur_us : 0, "yes", &fi);
    }
    if (timed) EmitBest("softmax", "f16>f32", shape);
    cudaFree(ca);
    cudaFree(cb);
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  bool do_rms = true, do_add = true, do_sm = true, do_scale = true;
  bool do_f16 = true, do_bf16 = true, do_f32 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) {
      const std::string l = argv[++i];
      do_rms = l.find("rmsnorm") != std::string::npos;
      do_add = l.find("add") != std::string::npos;
      do_sm = l.find("softmax") != std::string::npos;
      do_scale = l.find("scale") != std::string::npos;
    } else if (!std::strcmp(argv[i], "--dtypes") && i + 1 < argc) {
      const std::string l = argv[++i];
      do_f16 = l.find("float16") != std::string::npos;
      do_bf16 = l.find("bfloat16") != std::string::npos;
      do_f32 = l.find("float32") != std::string::npos;
    } else if (!std::strcmp(argv[i], "--match") && i + 1 < argc) {
      g_match = argv[++i];
    } else if (!std::strcmp(argv[i], "--skip") && i + 1 < argc) {
      g_skip = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: k17_lab [--reps N] [--ops rmsnorm,add,scale,softmax] [--dtypes "
                   "float16,bfloat16,float32] [--match S] [--skip S]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf(
      "k17_lab: %s, %d SMs, L2 %d MiB; CUDA events, L2 read-flushed, median of %d; "
      "x copy = copy us / us, x cur = current us / us\n",
      prop.name, g_sms, prop.l2CacheSize >> 20, reps);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  g_flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  CK(cudaMalloc(&g_flush, g_flush_bytes));
  CK(cudaMemset(g_flush, 1, g_flush_bytes));
  CK(cudaMalloc(&g_sink, sizeof(unsigned)));

  // Correctness only (us column 1.00): tails of the vector path (units not
  // a multiple of the block), the scalar path (hidden 127, 4097), one row.
  const std::vector<std::pair<int64_t, int64_t>> rms_tails = {{1, 127},  {1, 4097}, {3, 4104},
                                                              {7, 1000}, {5, 8200}, {1000, 4096}};
  const std::vector<std::pair<int64_t, int64_t>> rms_timed = {
      {4096, 4096}, {16, 4096}, {1, 4096}, {64, 8192}, {32768, 8192}};
  // float32 (--dtypes float32): the same bytes a row as float16 at half the
  // hidden size, so hidden 2048 and 4096 are the float16 rows of 4096 and
  // 8192 (512 and 1024 packs); 64 x 8192 is past the variants (current only).
  const std::vector<std::pair<int64_t, int64_t>> rms_timed_f32 = {
      {4096, 2048}, {16, 2048}, {4096, 4096}, {16, 4096}, {1, 4096}, {64, 4096}, {64, 8192}};
  const std::vector<std::pair<int64_t, int64_t>> add_tails = {{1, 127}, {1, 4097}, {3, 4104}};
  // The small shapes where add / scale trail torch eager (4-7 us), then mid
  // and large.
  const std::vector<std::pair<int64_t, int64_t>> add_timed = {
      {1, 4096},    {1, 8192},    {16, 4096},   {64, 8192},  {16, 32768},
      {16, 128256}, {64, 32768},  {4096, 4096}, {32768, 8192}};

  std::printf("\n== correctness at tail shapes (failures only) ==\n");
  if (do_rms) {
    if (do_f16) RunRms<__half>(s, reps, rms_tails, false);
    if (do_bf16) RunRms<__nv_bfloat16>(s, reps, rms_tails, false);
    if (do_f32) RunRms<float>(s, reps, rms_tails, false);
  }
  if (do_add) {
    if (do_f16) RunAdd<__half>(s, reps, add_tails, false);
    if (do_bf16) RunAdd<__nv_bfloat16>(s, reps, add_tails, false);
    if (do_f32) RunAdd<float>(s, reps, add_tails, false);
  }
  if (do_scale) {
    if (do_f16) RunScale<__half>(s, reps, add_tails, false);
    if (do_bf16) RunScale<__nv_bfloat16>(s, reps, add_tails, false);
    if (do_f32) RunScale<float>(s, reps, add_tails, false);
  }
  // Softmax decode: the workspace for the grid variants' partials and
  // counters (zeroed once; the kernel leaves its counters at zero).
  // Tails: vocab 1, 127, 4097, 32768 + 5 (single elements), 32768 + 4 and
  // 4100 (packs, a partial last block), rows 1, 3, 17.
  std::vector<std::pair<int64_t, int64_t>> sm_tails = {{1, 4100}, {3, 50000}, {1, 1000}, {17, 32772},
                                                       {5, 16384}, {64, 4096}};
  for (int64_t r : {1, 3, 17})
    for (int64_t v : {1, 127, 4097, 32773}) sm_tails.push_back({r, v});
  const std::vector<std::pair<int64_t, int64_t>> sm_timed = {
      {16, 4096},  {1, 32000},   {1, 32768},   {16, 32768},  {64, 32768},
      {64, 50000}, {1, 128256},  {4, 128256},  {16, 128256}, {64, 128256}};
  if (do_sm) {
    g_smws.max_rows = 256;
    g_smws.max_partials = 8 * int64_t{g_sms} * 16;
    CK(cudaMalloc(&g_smws.ws, g_smws.max_partials * sizeof(float2)));
    CK(cudaMalloc(&g_smws.cnt, 2 * g_smws.max_rows * sizeof(int)));
    CK(cudaMemset(g_smws.cnt, 0, 2 * g_smws.max_rows * sizeof(int)));
    // Split variants: at most one wave of blocks (<= 32 an SM), 256 rows.
    SplitWsInit(&g_ws_cnt, 32 * int64_t{g_sms}, 256);
    SplitWsInit(&g_ws_tag, 32 * int64_t{g_sms}, 256);
    RunSoftmax(s, reps, sm_tails, false);
  }
  std::printf("correctness at tail shapes: %d runs checked, %d failed\n", g_checked, g_failed);
  std::printf("\n== timed shapes ==\n");
  g_timed = true;
  PrintHeader();
  if (do_rms) {
    if (do_f16) RunRms<__half>(s, reps, rms_timed, true);
    if (do_bf16) RunRms<__nv_bfloat16>(s, reps, rms_timed, true);
    if (do_f32) RunRms<float>(s, reps, rms_timed_f32, true);
  }
  if (do_add) {
    if (do_f16) RunAdd<__half>(s, reps, add_timed, true);
    if (do_bf16) RunAdd<__nv_bfloat16>(s, reps, add_timed, true);
    if (do_f32) RunAdd<float>(s, reps, add_timed, true);
  }
  if (do_scale) {
    if (do_f16) RunScale<__half>(s, reps, add_timed, true);
    if (do_bf16) RunScale<__nv_bfloat16>(s, reps, add_timed, true);
    if (do_f32) RunScale<float>(s, reps, add_timed, true);
  }
  if (do_sm) RunSoftmax(s, reps, sm_timed, true);
  PrintSummary();
  return 0;
}
