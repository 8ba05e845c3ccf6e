// The top-k kernels of top_k_mask_logits and top_k_renorm_probs: per row, a
// radix select of the k-th largest value over the bits of an order-keeping
// key (8 bits a round: 4 rounds for float32, 2 for 16-bit types, stopping as
// soon as the rest of the row's digit is kept whole), then one pass that
// writes the outputs: the kept values or -inf (kMask), p / the kept mass or
// 0 (kRenorm).
//
// Two kernels, chosen by ChoosePlan (plan.h):
//  - cached: a row split over the C blocks of a thread-block cluster (C = 1:
//    one block a row, any arch). Each block keeps its part in registers as
//    16-byte packs (read once, written once); each round's 256-bin
//    histogram is built in shared memory and summed over the cluster through
//    distributed shared memory, so every block finds the same digit with
//    one cluster barrier a round and no global atomics.
//  - streaming: one block a row, the row re-read (L2) every round; for rows
//    no cluster caches (no sm_90, or past 16 blocks).
// Histogram counts are plain shared-memory atomics, one a key. Aggregating
// a warp's lanes that share a bin first (__match_any_sync) made every key
// wait on a shared-memory round trip and ran 2-3 x slower, though logits
// bunch into a few exponent bins (bench/labs/top_k_lab.cu).
//
// Keys: the value's bits made order-keeping (a bijection: the cached keys
// give the values back bit for bit), -0 compared as +0, NaN ranked by its
// bits (above +inf with the sign bit clear, below -inf with it set).
// Framework-agnostic (model: ops/softmax/cuda.cuh): raw pointers, launchers
// return cudaError_t.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/vec.cuh"
#include "ops/top_k_mask_logits/plan.h"

namespace kerneld::cuda::top_k {

enum class Mode { kMask, kRenorm };

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Order-keeping unsigned keys (bigger value, bigger key); kBits of them.
template <typename T>
struct KeyTraits {
  static constexpr int kBits = 16;
};
template <>
struct KeyTraits<float> {
  static constexpr int kBits = 32;
};

// The bits with the sign bit flipped for positives and every bit flipped
// for negatives: a bijection, so a kernel can cache keys instead of values
// and restore the values bit for bit. -0 sits just below +0 (Canon merges
// them where keys are compared); NaN ranks by its bits.
__device__ __forceinline__ uint32_t KeyOf(float x) {
  const uint32_t b = __float_as_uint(x);
  return b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) | 0x80000000u);
}
__device__ __forceinline__ uint32_t Key16(uint32_t b) {
  return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
}
__device__ __forceinline__ uint32_t KeyOf(__half x) { return Key16(__half_as_ushort(x)); }
__device__ __forceinline__ uint32_t KeyOf(__nv_bfloat16 x) {
  return Key16(__bfloat16_as_ushort(x));
}

template <typename T>
__device__ __forceinline__ T FromKey(uint32_t k);
template <>
__device__ __forceinline__ float FromKey<float>(uint32_t k) {
  return __uint_as_float(k ^ (~static_cast<uint32_t>(static_cast<int32_t>(k) >> 31) | 0x80000000u));
}
__device__ __forceinline__ unsigned short Bits16(uint32_t k) {
  return static_cast<unsigned short>((k & 0x8000u) ? (k ^ 0x8000u) : (~k & 0xffffu));
}
template <>
__device__ __forceinline__ __half FromKey<__half>(uint32_t k) {
  return __ushort_as_half(Bits16(k));
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromKey<__nv_bfloat16>(uint32_t k) {
  return __ushort_as_bfloat16(Bits16(k));
}

// Row r's k: top_k is int32 (k64 = 0) or int64, k_stride 0 (one k for all
// rows) or 1.
__device__ __forceinline__ int64_t RowK(const void* top_k, int k64, int64_t k_stride, int64_t r) {
  return k64 ? static_cast<const int64_t*>(top_k)[r * k_stride]
             : int64_t{static_cast<const int32_t*>(top_k)[r * k_stride]};
}

// ---------------------------------------------------------------------------
// Cluster plumbing: a no-op for one block (any arch), distributed shared
// memory for a cluster (sm_90+; the launcher never launches one elsewhere).

__device__ __forceinline__ void ClusterSync(int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (c > 1) cooperative_groups::this_cluster().sync();
#endif
}
template <typename P>
__device__ __forceinline__ P* PeerShared(P* p, int c, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (c > 1) return cooperative_groups::this_cluster().map_shared_rank(p, rank);
#endif
  return p;
}
__device__ __forceinline__ int ClusterRank(int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (c > 1) return static_cast<int>(cooperative_groups::this_cluster().block_rank());
#endif
  return 0;
}

struct SelectShared {
  uint32_t hist[2][256];  // a round's histogram; two, so one barrier a round suffices
  uint32_t scan[8];       // warp totals of the bin scan
  uint32_t digit, rest, in_digit;
  float red[32];  // block reductions
  float part;     // this block's kept mass (kRenorm), read by the cluster
};

// Inclusive prefix sum of v over threads 0..255 (the bins in descending
// order); other threads pass and get nothing useful. Every thread calls it.
__device__ __forceinline__ uint32_t BinScan(uint32_t v, uint32_t* scan) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= static_cast<unsigned>(o)) v += y;
  }
  if (lane == 31 && warp < 8) scan[warp] = v;
  __syncthreads();
  if (warp < 8)
    for (unsigned w = 0; w < warp; ++w) v += scan[w];
  return v;
}

// The key of the row's k-th largest value, or a lower cut that keeps exactly
// the same values: every block of the row's cluster calls it with its own
// elements (`each(f)` calls f(key, valid) for each, the same number of times
// on every lane of a warp) and gets the same answer. 0 < k < the row's count.
template <int kBits, typename Each>
__device__ uint32_t SelectCut(Each each, int64_t k, SelectShared& sh, int c) {
  const int tid = static_cast<int>(threadIdx.x);
  uint32_t prefix = 0, rest = static_cast<uint32_t>(k);
#pragma unroll 1
  for (int round = 0; round < kBits / 8; ++round) {
    const int shift = kBits - 8 * (round + 1);
    // The bits decided so far (none in round 0).
    const uint32_t high = round == 0 ? 0u : (0xffffffffu >> (32 - kBits)) & (~0u << (shift + 8));
    uint32_t* h = sh.hist[round & 1];
    for (int i = tid; i < 256; i += static_cast<int>(blockDim.x)) h[i] = 0;
    __syncthreads();
    each([&](uint32_t key, bool valid) {
      if (valid && (key & high) == prefix) atomicAdd(&h[(key >> shift) & 0xffu], 1u);
    });
    __syncthreads();
    ClusterSync(c);  // every block's histogram is complete
    // Thread t counts bin 255 - t over the cluster (the same order in every
    // block: the same sums), then scans: incl = keys in bins >= that bin.
    // The c loads are independent: unrolled to kMaxCluster, they are all in
    // flight at once instead of one remote round trip after another.
    uint32_t count = 0;
    if (tid < 256) {
#pragma unroll
      for (int r = 0; r < kMaxCluster; ++r)
        if (r < c) count += PeerShared(h, c, r)[255 - tid];
    }
    const uint32_t incl = BinScan(count, sh.scan);
    if (tid < 256 && incl >= rest && incl - count < rest) {
      sh.digit = 255u - static_cast<uint32_t>(tid);
      sh.rest = rest - (incl - count);
      sh.in_digit = count;
    }
    __syncthreads();
    prefix |= sh.digit << shift;
    const bool whole = sh.rest == sh.in_digit;  // the digit's keys are all kept
    rest = sh.rest;
    // sh.digit and friends are next written after two more barriers, which
    // every thread reaches only after reading them here.
    if (whole) break;
  }
  return prefix;
}

// Sum of v over the row's blocks, the same in every block (fixed order).
__device__ __forceinline__ float RowSum(float v, SelectShared& sh, int c) {
  v = blockops::Sum(v, sh.red);
  if (c == 1) return v;
  if (threadIdx.x == 0) sh.part = v;
  ClusterSync(c);
  float s = 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxCluster; ++r)
    if (r < c) s += *PeerShared(&sh.part, c, r);
  return s;
}

// -0's key as +0's, where keys are compared: equal values rank equal.
template <typename T>
__device__ __forceinline__ uint32_t Canon(uint32_t k) {
  constexpr uint32_t kPosZero = 1u << (KeyTraits<T>::kBits - 1);
  return k == kPosZero - 1 ? kPosZero : k;
}

// An output element from a cached key: kept, the value itself (kMask) or
// value * inv (kRenorm); otherwise -inf or 0.
template <Mode kMode, typename T>
__device__ __forceinline__ T Out(uint32_t key, uint32_t cut, float inv) {
  const bool kept = Canon<T>(key) >= cut;
  if constexpr (kMode == Mode::kMask) {
    return kept ? FromKey<T>(key) : FromFloat<T>(-INFINITY);
  } else {
    return FromFloat<T>(kept ? ToFloat(FromKey<T>(key)) * inv : 0.0f);
  }
}

// 1 / the kept mass (0 when there is none), for kRenorm.
__device__ __forceinline__ float InvMass(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

// Register-cached kernel: grid.x = rows * c; block `rank` of a row's c owns
// packs [rank * chunk, (rank + 1) * chunk), cached as keys (kItems * N of
// them a thread). Loads happen before any store, and each block stores only
// its own packs: y may equal x.
// Two blocks an SM for 2-byte types (at most 64 registers; a few spill at
// 32 keys a thread): more warps to hide the histogram's shared-memory
// atomics (64 x 128256 float16, H100, 2026-11-26: 55 -> 43 us).
template <Mode kMode, typename T, int N, int kItems>
__global__ void __launch_bounds__(kMaxThreads, 2)
    TopKCachedKernel(const T* x, T* y, const void* top_k, int k64, int64_t k_stride, int64_t vocab,
                     int64_t chunk, int c) {
  __shared__ SelectShared sh;
  const int rank = ClusterRank(c);
  const int64_t row = blockIdx.x / c;
  const int64_t units = vocab / N;
  const int64_t u0 = int64_t{rank} * chunk;
  const int64_t u1 = min(units, u0 + chunk);
  const Pack<T, N>* xr = reinterpret_cast<const Pack<T, N>*>(x + row * vocab);
  uint32_t key[kItems][N];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t u = u0 + threadIdx.x + int64_t{i} * blockDim.x;
    const Pack<T, N> p = u < u1 ? xr[u] : Pack<T, N>{};
#pragma unroll
    for (int j = 0; j < N; ++j) key[i][j] = KeyOf(p.v[j]);
  }
  const int64_t k = RowK(top_k, k64, k_stride, row);
  uint32_t cut = 0;  // keep keys >= cut; 0 keeps everything
  if (k > 0 && k < vocab) {
    cut = SelectCut<KeyTraits<T>::kBits>(
        [&](auto&& f) {
#pragma unroll
          for (int i = 0; i < kItems; ++i) {
            const bool valid = u0 + threadIdx.x + int64_t{i} * blockDim.x < u1;
#pragma unroll
            for (int j = 0; j < N; ++j) f(Canon<T>(key[i][j]), valid);
          }
        },
        k, sh, c);
  }
  float inv = 1.0f;
  if constexpr (kMode == Mode::kRenorm) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (u0 + threadIdx.x + int64_t{i} * blockDim.x < u1)
#pragma unroll
        for (int j = 0; j < N; ++j)
          if (Canon<T>(key[i][j]) >= cut) s += ToFloat(FromKey<T>(key[i][j]));
    inv = InvMass(RowSum(s, sh, c));
  }
  Pack<T, N>* yr = reinterpret_cast<Pack<T, N>*>(y + row * vocab);
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t u = u0 + threadIdx.x + int64_t{i} * blockDim.x;
    if (u < u1) {
      Pack<T, N> o;
#pragma unroll
      for (int j = 0; j < N; ++j) o.v[j] = Out<kMode, T>(key[i][j], cut, inv);
      yr[u] = o;
    }
  }
  ClusterSync(c);  // no block leaves while another reads its shared memory
}

// Streaming kernel: one block a row (grid-stride over rows), elements read
// from memory in every round. A thread reads and writes the same elements
// in the last pass, after every read of the select: y may equal x.
template <Mode kMode, typename T>
__global__ void __launch_bounds__(kStreamThreads)
    TopKStreamKernel(const T* x, T* y, const void* top_k, int k64, int64_t k_stride, int64_t rows,
                     int64_t vocab) {
  __shared__ SelectShared sh;
  const int64_t span = (vocab + blockDim.x - 1) / blockDim.x * blockDim.x;  // warp-uniform trips
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * vocab;
    const int64_t k = RowK(top_k, k64, k_stride, row);
    uint32_t cut = 0;
    if (k > 0 && k < vocab) {
      cut = SelectCut<KeyTraits<T>::kBits>(
          [&](auto&& f) {
            for (int64_t i = threadIdx.x; i < span; i += blockDim.x)
              f(i < vocab ? Canon<T>(KeyOf(xr[i])) : 0u, i < vocab);
          },
          k, sh, 1);
    }
    float inv = 1.0f;
    if constexpr (kMode == Mode::kRenorm) {
      float s = 0.0f;
      for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
        if (Canon<T>(KeyOf(xr[i])) >= cut) s += ToFloat(xr[i]);
      inv = InvMass(RowSum(s, sh, 1));
    }
    T* yr = y + row * vocab;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
      yr[i] = Out<kMode, T>(KeyOf(xr[i]), cut, inv);
    __syncthreads();  // sh is reused by the next row
  }
}

// ---------------------------------------------------------------------------
// Shared-memory-cached kernel (16-bit types; plan.h, ChooseSharedCluster):
// grid.x = rows * c, block `rank` of a row's c caches packs [rank * chunk,
// (rank + 1) * chunk) in dynamic shared memory as keys, two a 32-bit word.
// The keys stay the bijective ones (not Canon'd): the cut is lowered past
// -0 instead where it lands on +0 and the row holds one, so the select and
// the output compare raw keys, with no per-key canonicalization.

// Key16 of the two 16-bit values of a word, and its inverse: positives get
// the sign bit set, negatives every bit flipped, per half.
__device__ __forceinline__ uint32_t Keys2(uint32_t w) {
  return w ^ 0x80008000u ^ (((w & 0x80008000u) >> 15) * 0x7fffu);
}
__device__ __forceinline__ uint32_t Bits2(uint32_t k) {
  return k ^ 0x80008000u ^ (((~k & 0x80008000u) >> 15) * 0x7fffu);
}

// One kRenorm output half-word from a raw 16-bit key (kept: key >= cut).
template <typename T>
__device__ __forceinline__ uint32_t RenormBits(uint32_t key, uint32_t cut, float inv) {
  const T v = FromFloat<T>(key >= cut ? ToFloat(FromKey<T>(key)) * inv : 0.0f);
  if constexpr (std::is_same_v<T, __half>)
    return __half_as_ushort(v);
  else
    return __bfloat16_as_ushort(v);
}

template <Mode kMode, typename T>
__global__ void __launch_bounds__(kSharedThreads, 1)
    TopKSharedKernel(const T* x, T* y, const void* top_k, int k64, int64_t k_stride, int64_t vocab,
                     int64_t chunk, int c) {
  static_assert(sizeof(T) == 2, "two keys a word");
  extern __shared__ uint4 cached[];  // this block's packs of 8 keys
  __shared__ SelectShared sh;
  const int rank = ClusterRank(c);
  const int64_t row = blockIdx.x / c;
  const int64_t units = vocab / 8;
  const int64_t u0 = int64_t{rank} * chunk;
  const int n = static_cast<int>(max(int64_t{0}, min(units, u0 + chunk) - u0));
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * vocab) + u0;
  // Four packs in flight a thread before any is converted.
  for (int base = tid; base < n; base += 4 * nt) {
    uint4 p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (base + i * nt < n) p[i] = xr[base + i * nt];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (base + i * nt < n)
        cached[base + i * nt] =
            make_uint4(Keys2(p[i].x), Keys2(p[i].y), Keys2(p[i].z), Keys2(p[i].w));
  }
  __syncthreads();
  const int64_t k = RowK(top_k, k64, k_stride, row);
  uint32_t cut = 0;
  if (k > 0 && k < vocab) {
    // Warp-uniform trips (SelectCut's contract); a pack past n is invalid.
    const int span = (n + nt - 1) / nt * nt;
    auto each = [&](auto&& f) {
      for (int u = tid; u < span; u += nt) {
        const bool valid = u < n;
        const uint4 w = valid ? cached[u] : make_uint4(0, 0, 0, 0);
        f(w.x & 0xffffu, valid), f(w.x >> 16, valid);
        f(w.y & 0xffffu, valid), f(w.y >> 16, valid);
        f(w.z & 0xffffu, valid), f(w.z >> 16, valid);
        f(w.w & 0xffffu, valid), f(w.w >> 16, valid);
      }
    };
    cut = SelectCut<16>(each, k, sh, c);
    // On raw keys -0 sits just below +0. A cut at +0 (the k-th value, or
    // the low end of a digit kept whole) keeps -0 too exactly when the row
    // holds a +0: equal values rank equal. Rare (the cut among the
    // smallest positives), so counted only then; the cut is the same in
    // every block of the row, and so is the branch.
    if (cut == 0x8000u) {
      float zeros = 0.0f;
      each([&](uint32_t key, bool valid) { zeros += valid && key == 0x8000u ? 1.0f : 0.0f; });
      if (RowSum(zeros, sh, c) > 0.0f) cut = 0x7fffu;
      ClusterSync(c);  // every block has read sh.part before RowSum writes it again
    }
  }
  float inv = 1.0f;
  if constexpr (kMode == Mode::kRenorm) {
    float s = 0.0f;
    for (int u = tid; u < n; u += nt) {
      const uint4 w = cached[u];
      for (uint32_t h : {w.x, w.y, w.z, w.w})
        for (uint32_t key : {h & 0xffffu, h >> 16})
          if (key >= cut) s += ToFloat(FromKey<T>(key));
    }
    inv = InvMass(RowSum(s, sh, c));
  }
  uint4* yr = reinterpret_cast<uint4*>(y + row * vocab) + u0;
  for (int u = tid; u < n; u += nt) {
    const uint4 w = cached[u];
    uint4 o;
    uint32_t* ow = &o.x;
    const uint32_t* iw = &w.x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (kMode == Mode::kMask) {
        // Kept halves restored, the others -inf; word at a time.
        constexpr uint32_t kNegInf = std::is_same_v<T, __half> ? 0xfc00u : 0xff80u;
        const uint32_t bits = Bits2(iw[j]);
        const uint32_t lo = (iw[j] & 0xffffu) >= cut ? (bits & 0xffffu) : kNegInf;
        const uint32_t hi = (iw[j] >> 16) >= cut ? (bits >> 16) : kNegInf;
        ow[j] = lo | (hi << 16);
      } else {
        ow[j] =
            RenormBits<T>(iw[j] & 0xffffu, cut, inv) | (RenormBits<T>(iw[j] >> 16, cut, inv) << 16);
      }
    }
    yr[u] = o;
  }
  ClusterSync(c);  // no block leaves while another reads its shared memory
}

#ifndef __CUDACC_RTC__  // the launchers: host code, which NVRTC does not compile

namespace detail {

// The launch of rows * c blocks of `threads`, in clusters of c (none when
// c = 1), with `smem` bytes of dynamic shared memory each. Not copyable:
// cfg points at attr.
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  ClusterLaunch(int64_t rows, int c, int threads, size_t smem, cudaStream_t s) {
    cfg.gridDim = dim3(static_cast<unsigned>(rows * c));
    cfg.blockDim = dim3(static_cast<unsigned>(threads));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(c);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = c > 1 ? 1 : 0;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Whether `kernel` may launch on `device`: its PTX is sm_90+ (an older
// arch's code has no cluster barrier) and opt_in() (a cudaFuncSetAttribute
// the launch needs) succeeded, asked once a device (ordinals below 64) and
// remembered. `ready` and `failed` belong to one kernel: every
// instantiation of a kernel template for a dtype has the same function
// type, so state kept per type would let one kernel's opt-in stand for
// another's. A refusal recorded later (the launch itself refused) outranks.
template <typename Kernel, typename OptIn>
bool ReadyOnDevice(Kernel kernel, int device, std::atomic<uint64_t>& ready,
                   std::atomic<uint64_t>& failed, OptIn opt_in) {
  if (device < 0 || device >= 64) return false;
  const uint64_t bit = uint64_t{1} << device;
  if (failed.load(std::memory_order_acquire) & bit) return false;
  if (ready.load(std::memory_order_acquire) & bit) return true;
  cudaFuncAttributes fa{};
  const bool ok =
      cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && fa.ptxVersion >= 90 && opt_in();
  (void)cudaGetLastError();  // a refusal is an answer, not the request's error
  (ok ? ready : failed).fetch_or(bit, std::memory_order_acq_rel);
  return ok;
}

// Records that the device refused a launch of the kernel these bits belong
// to: the answer does not change, so later calls plan otherwise at once.
inline void RefusedOnDevice(int device, std::atomic<uint64_t>& failed) {
  (void)cudaGetLastError();
  if (device >= 0 && device < 64) failed.fetch_or(uint64_t{1} << device, std::memory_order_acq_rel);
}

template <Mode kMode, typename T, int N, int kItems>
cudaError_t LaunchCached(const T* x, T* y, const void* top_k, int k64, int64_t k_stride,
                         int64_t rows, int64_t vocab, const Plan& plan, const DeviceCaps& dev,
                         cudaStream_t s, bool* launched) {
  auto kernel = TopKCachedKernel<kMode, T, N, kItems>;
  const int c = plan.cluster;
  const int64_t chunk = (vocab / N + c - 1) / c;
  *launched = false;
  if (c == 1) {
    kernel<<<static_cast<unsigned>(rows), plan.threads, 0, s>>>(x, y, top_k, k64, k_stride, vocab,
                                                                chunk, c);
    *launched = true;
    return cudaGetLastError();
  }
  // Per kernel (this instantiation) and device; 16-block clusters apart,
  // since only they need the opt-in.
  static std::atomic<uint64_t> ready[2], failed[2];
  const int wide = c > 8 ? 1 : 0;
  // Clusters of more than 8 blocks are opt-in per kernel and device.
  if (!ReadyOnDevice(kernel, dev.index, ready[wide], failed[wide], [&] {
        return c <= 8 ||
               cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
                   cudaSuccess;
      }))
    return cudaSuccess;
  const ClusterLaunch launch(rows, c, plan.threads, 0, s);
  if (cudaLaunchKernelEx(&launch.cfg, kernel, x, y, top_k, k64, k_stride, vocab, chunk, c) !=
      cudaSuccess) {
    // Refused: the device cannot place this cluster of this kernel (a
    // 16-block cluster of blocks that each fill an SM's registers); the
    // next call plans smaller at once.
    RefusedOnDevice(dev.index, failed[wide]);
    return cudaSuccess;
  }
  *launched = true;
  return cudaSuccess;
}

template <Mode kMode, typename T, int N>
cudaError_t LaunchPlan(const T* x, T* y, const void* top_k, int k64, int64_t k_stride, int64_t rows,
                       int64_t vocab, const Plan& plan, const DeviceCaps& dev, cudaStream_t s,
                       bool* launched) {
  switch (plan.items) {
#define KERNELD_TOP_K_CASE(I)                                      \
  case I:                                                          \
    return LaunchCached<kMode, T, N, (I * N <= kMaxKeys ? I : 1)>( \
        x, y, top_k, k64, k_stride, rows, vocab, plan, dev, s, launched);
    KERNELD_TOP_K_CASE(1)
    KERNELD_TOP_K_CASE(2)
    KERNELD_TOP_K_CASE(4)
    KERNELD_TOP_K_CASE(8)
    KERNELD_TOP_K_CASE(16)
#undef KERNELD_TOP_K_CASE
    default:
      *launched = false;
      return cudaSuccess;
  }
}

// The shared-memory plan for c > 0 (sizeof(T) == 2, 16-byte packs);
// *launched false when the device refuses it (the caller plans again).
template <Mode kMode, typename T>
cudaError_t LaunchShared(const T* x, T* y, const void* top_k, int k64, int64_t k_stride,
                         int64_t rows, int64_t vocab, int c, const DeviceCaps& dev, cudaStream_t s,
                         bool* launched) {
  auto kernel = TopKSharedKernel<kMode, T>;
  *launched = false;
  const int64_t chunk = (vocab / 8 + c - 1) / c;
  // The opt-in to more than 48 KiB of dynamic shared memory, once a device.
  static std::atomic<uint64_t> ready, failed;
  if (!ReadyOnDevice(kernel, dev.index, ready, failed, [&] {
        return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSharedCacheBytes)) == cudaSuccess;
      }))
    return cudaSuccess;
  const int forced = g_shared_threads.load(std::memory_order_relaxed);
  const ClusterLaunch launch(rows, c, forced > 0 ? forced : kSharedThreads,
                             static_cast<size_t>(chunk) * 16, s);
  if (cudaLaunchKernelEx(&launch.cfg, kernel, x, y, top_k, k64, k_stride, vocab, chunk, c) !=
      cudaSuccess) {
    RefusedOnDevice(dev.index, failed);  // the register plan serves, now and later
    return cudaSuccess;
  }
  *launched = true;
  return cudaSuccess;
}

template <Mode kMode, typename T, int N>
cudaError_t Launch(const T* x, T* y, const void* top_k, int k64, int64_t k_stride, int64_t rows,
                   int64_t vocab, const DeviceCaps& dev, cudaStream_t s) {
  const int force = g_force_cluster.load(std::memory_order_relaxed);
  constexpr int kBytes = static_cast<int>(sizeof(T));
  if constexpr (kBytes == 2 && N == 8) {
    const int c = ChooseSharedCluster(rows, vocab, kBytes, dev,
                                      g_force_shared.load(std::memory_order_relaxed), force);
    if (c > 0) {
      bool launched = false;
      const cudaError_t e =
          LaunchShared<kMode, T>(x, y, top_k, k64, k_stride, rows, vocab, c, dev, s, &launched);
      if (e != cudaSuccess || launched) return e;
    }
  }
  Plan plan = ChoosePlan(rows, vocab / N, N, dev, force, kMaxCluster, kBytes);
  bool launched = false;
  cudaError_t e =
      LaunchPlan<kMode, T, N>(x, y, top_k, k64, k_stride, rows, vocab, plan, dev, s, &launched);
  if (e == cudaSuccess && !launched && plan.cluster > 8) {
    // A 16-block cluster needs 16 free SMs of one GPC: when the device
    // cannot place one, the portable 8 still caches rows this long.
    plan = ChoosePlan(rows, vocab / N, N, dev, force > 8 ? 8 : force, 8, kBytes);
    e = LaunchPlan<kMode, T, N>(x, y, top_k, k64, k_stride, rows, vocab, plan, dev, s, &launched);
  }
  if (e != cudaSuccess || launched) return e;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 30));
  TopKStreamKernel<kMode, T>
      <<<grid, kStreamThreads, 0, s>>>(x, y, top_k, k64, k_stride, rows, vocab);
  return cudaGetLastError();
}

}  // namespace detail

// y[r, :] = x[r, :] filtered to its top k (kMask: others -inf; kRenorm:
// kept / their sum, others 0) for r < rows, rows of `vocab` elements, on
// `stream`. top_k: int32 (k64 = 0) or int64 in device memory, one value
// (k_stride 0) or one a row (1). y may equal x. Any vocab, any alignment.
template <Mode kMode, typename T>
cudaError_t TopK(const T* x, T* y, const void* top_k, int k64, int64_t k_stride, int64_t rows,
                 int64_t vocab, const DeviceCaps& dev, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  // 16-byte packs when every row start of x and y is aligned to one; single
  // elements otherwise (odd vocabularies such as 50257, misaligned views).
  constexpr int kN = 16 / sizeof(T);
  const bool packs = vocab % kN == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (packs)
    return detail::Launch<kMode, T, kN>(x, y, top_k, k64, k_stride, rows, vocab, dev, stream);
  return detail::Launch<kMode, T, 1>(x, y, top_k, k64, k_stride, rows, vocab, dev, stream);
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::top_k
