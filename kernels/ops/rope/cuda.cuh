// rope, CUDA kernels: rotate q and k in place, float32 math, one rounding.
//
// A work unit is (token, head, kV consecutive rotation pairs). Blocks walk
// tokens (grid-stride over x) and split a token's units across grid.y when
// there are few tokens (decode), so small batches still fill the GPU. With
// kV = 4 each unit moves its pairs with vector loads (NeoX: two 4-element
// runs x[i..i+4) and x[i+half..]; GPT-J: one 8-element run) and reads 4 cos
// and 4 sin with one 16-byte load each; the scalar variant (kV = 1) takes
// every other shape and alignment. A token whose position is outside
// [0, max_position) is skipped: the kernel never reads outside the cache
// (the cpu backend rejects such requests instead).
//
// Framework-agnostic: raw pointers, templated on the element and position
// types, the launcher returns cudaError_t. The binding (cuda.cu) adapts the
// KernelContext (and copies q, k first when the outputs are not in place).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"
#include "common/cuda/width.cuh"

namespace kerneld::cuda::rope {

template <typename T, int N>
struct alignas(sizeof(T) * N) RopePack {
  T v[N];
};

template <int N>
__device__ __forceinline__ void LoadAngles(const float* p, float* out) {
  if constexpr (N == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    out[0] = f.x, out[1] = f.y, out[2] = f.z, out[3] = f.w;
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = p[j];
  }
}

// kHead, kRot, kHq, kHk: head_dim, rot_dim and the head counts compiled in
// (the JIT form), 0 at run time (the AOT build).
template <typename T, typename P, int kV, bool kNeox, int kHead = 0, int kRot = 0, int kHq = 0,
          int kHk = 0>
__global__ void RopeKernel(T* __restrict__ q, T* __restrict__ k, const P* __restrict__ positions,
                           const float* __restrict__ cache, int64_t tokens, int hq, int hk,
                           int head, int rot, int64_t max_pos) {
  head = Width<kHead>(head);
  rot = Width<kRot>(rot);
  hq = Width<kHq>(hq);
  hk = Width<kHk>(hk);
  const int half = rot / 2;
  const int per_head = half / kV;  // units per head
  const int units = (hq + hk) * per_head;
  // This block's share of a token's units.
  const int u_begin = static_cast<int>(int64_t{units} * blockIdx.y / gridDim.y);
  const int u_end = static_cast<int>(int64_t{units} * (blockIdx.y + 1) / gridDim.y);
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t pos = static_cast<int64_t>(positions[t]);
    if (pos < 0 || pos >= max_pos) continue;  // uniform over the block
    const float* cos_row = cache + pos * rot;
    const float* sin_row = cos_row + half;
    for (int u = u_begin + threadIdx.x; u < u_end; u += blockDim.x) {
      const int h = u / per_head;
      const int i0 = (u - h * per_head) * kV;  // first pair of the unit
      T* x = h < hq ? q + (t * hq + h) * head : k + (t * hk + (h - hq)) * head;
      float c[kV], s[kV];
      LoadAngles<kV>(cos_row + i0, c);
      LoadAngles<kV>(sin_row + i0, s);
      if constexpr (kNeox) {
        RopePack<T, kV>* p1 = reinterpret_cast<RopePack<T, kV>*>(x + i0);
        RopePack<T, kV>* p2 = reinterpret_cast<RopePack<T, kV>*>(x + half + i0);
        RopePack<T, kV> a = *p1, b = *p2;
#pragma unroll
        for (int j = 0; j < kV; ++j) {
          const float x1 = ToFloat(a.v[j]), x2 = ToFloat(b.v[j]);
          a.v[j] = FromFloat<T>(x1 * c[j] - x2 * s[j]);
          b.v[j] = FromFloat<T>(x2 * c[j] + x1 * s[j]);
        }
        *p1 = a;
        *p2 = b;
      } else if constexpr (kV == 1) {
        // Element by element: a pair need not be aligned as a pair (odd
        // head_dim, or an offset view).
        T* p = x + 2 * i0;
        const float x1 = ToFloat(p[0]), x2 = ToFloat(p[1]);
        p[0] = FromFloat<T>(x1 * c[0] - x2 * s[0]);
        p[1] = FromFloat<T>(x2 * c[0] + x1 * s[0]);
      } else {
        RopePack<T, 2 * kV>* p = reinterpret_cast<RopePack<T, 2 * kV>*>(x + 2 * i0);
        RopePack<T, 2 * kV> a = *p;
#pragma unroll
        for (int j = 0; j < kV; ++j) {
          const float x1 = ToFloat(a.v[2 * j]), x2 = ToFloat(a.v[2 * j + 1]);
          a.v[2 * j] = FromFloat<T>(x1 * c[j] - x2 * s[j]);
          a.v[2 * j + 1] = FromFloat<T>(x2 * c[j] + x1 * s[j]);
        }
        *p = a;
      }
    }
  }
}

#ifndef __CUDACC_RTC__  // the launcher: host code, which NVRTC does not compile
inline bool AlignedTo(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Rotates q [tokens, hq, head] and k [tokens, hk, head] in place on
// `stream`, the first rot elements of each head, with cos_sin_cache
// [max_pos, rot] (cos | sin) at positions[t] (int32 or int64); NeoX
// (halves) or GPT-J (interleaved pairs) layout. The caller keeps
// (hq + hk) * rot / 2 and head below 2^31. sm_count sizes the split of a
// token's work over blocks.
template <typename T, typename P>
cudaError_t Rope(T* q, T* k, const P* pos, const float* cache, int64_t tokens, int64_t hq,
                 int64_t hk, int64_t head, int64_t rot, int64_t max_pos, bool neox, int sm_count,
                 cudaStream_t stream) {
  constexpr int kBlock = 256;
  const int64_t half = rot / 2;
  // The vector variant needs whole 4-pair units and every vector access
  // aligned: head rows (head_dim), the sin half (rot/2) and the bases.
  const size_t run = (neox ? 4 : 8) * sizeof(T);
  const bool vec = half % 4 == 0 && head % (neox ? 4 : 8) == 0 && AlignedTo(q, run) &&
                   AlignedTo(k, run) && IsAligned16(cache);
  const int64_t units = (hq + hk) * (vec ? half / 4 : half);
  if (tokens == 0 || units == 0) return cudaSuccess;
  // Few tokens: spread a token's units over several blocks (about two
  // blocks per SM in all); many tokens: one block walks a token's units.
  const int64_t sms = std::max(sm_count, 1);
  const int64_t split =
      std::clamp<int64_t>((2 * sms + tokens - 1) / tokens, 1, (units + kBlock - 1) / kBlock);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tokens, int64_t{1} << 30)),
                  static_cast<unsigned>(std::min<int64_t>(split, 65535)));
  const int ihq = static_cast<int>(hq), ihk = static_cast<int>(hk), ihead = static_cast<int>(head),
            irot = static_cast<int>(rot);
  if (vec && neox)
    RopeKernel<T, P, 4, true>
        <<<grid, kBlock, 0, stream>>>(q, k, pos, cache, tokens, ihq, ihk, ihead, irot, max_pos);
  else if (vec)
    RopeKernel<T, P, 4, false>
        <<<grid, kBlock, 0, stream>>>(q, k, pos, cache, tokens, ihq, ihk, ihead, irot, max_pos);
  else if (neox)
    RopeKernel<T, P, 1, true>
        <<<grid, kBlock, 0, stream>>>(q, k, pos, cache, tokens, ihq, ihk, ihead, irot, max_pos);
  else
    RopeKernel<T, P, 1, false>
        <<<grid, kBlock, 0, stream>>>(q, k, pos, cache, tokens, ihq, ihk, ihead, irot, max_pos);
  return cudaGetLastError();
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::rope
