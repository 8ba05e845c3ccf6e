// What the row-wise norm kernels (rmsnorm, fused_add_rmsnorm, layernorm)
// share beyond common/cuda/rows.cuh and split_rows.cuh: the row width a
// kernel runs at, a split kernel's slot, rmsnorm's output pack, and the
// launchers' split-row path. Device code for the AOT and JIT builds alike;
// the launch helper is host code.
//
// Each helper is written so that the kernels calling it compile to the same
// sm_90 SASS as the code it replaced, instruction for instruction: the same
// arithmetic in the same order (change one only with a SASS comparison).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/rows.cuh"
#include "common/cuda/split_rows.cuh"
#include "common/cuda/width.cuh"

#ifndef __CUDACC_RTC__  // host code: NVRTC compiles device code only
#include <optional>
#endif  // __CUDACC_RTC__

namespace kerneld::cuda {

// A norm kernel's row width: `units` (packs of N) fixed in place, to
// kUnits when the JIT compiles it in (common/cuda/width.cuh), and h
// returned: the row's element count as the float32 its means divide by.
// The int form converts then multiplies, the int64 form (the streaming
// kernels') multiplies first, as each kernel always has.
template <int64_t kUnits, int N>
__device__ __forceinline__ float NormWidth(int& units) {
  units = Width<kUnits>(units);
  return static_cast<float>(units) * N;
}
template <int64_t kUnits, int N>
__device__ __forceinline__ float NormWidth(int64_t& units) {
  units = Width<kUnits>(units);
  return static_cast<float>(units * N);
}

// A split kernel's widths fixed in place (to kUnits / kChunk when the JIT
// compiles them in) and this block's slot of the row.
template <int64_t kUnits, int64_t kChunk>
__device__ __forceinline__ SplitSlot NormSplitSlot(int64_t& units, int64_t& chunk) {
  units = Width<kUnits>(units);
  chunk = Width<kChunk>(chunk);
  return SplitSlot(units, chunk);
}

// rmsnorm's output pack: x * scale * (w + bias), rounded once, into o.
// RmsPack below returns it instead; the split kernel writes into its own
// pack because, returned, its bfloat16 form compiled to other SASS.
template <typename T, int N>
__device__ __forceinline__ void RmsPackInto(Pack<T, N>& o, const Pack<T, N>& x, float scale,
                                            const Pack<T, N>& w, float bias) {
#pragma unroll
  for (int j = 0; j < N; ++j)
    o.v[j] = FromFloat<T>(ToFloat(x.v[j]) * scale * (ToFloat(w.v[j]) + bias));
}

// The same, returned: from x's pack (rmsnorm), or from the float32 values
// the pack was computed as (fused_add_rmsnorm's unrounded x + residual).
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> RmsPack(const Pack<T, N>& x, float scale, const Pack<T, N>& w,
                                              float bias) {
  Pack<T, N> o;
  RmsPackInto(o, x, scale, w, bias);
  return o;
}
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> RmsPack(const float (&s)[N], float scale, const Pack<T, N>& w,
                                              float bias) {
  Pack<T, N> o;
#pragma unroll
  for (int j = 0; j < N; ++j) o.v[j] = FromFloat<T>(s[j] * scale * (ToFloat(w.v[j]) + bias));
  return o;
}

#ifndef __CUDACC_RTC__  // the launch: host code
// A norm launcher's first choice for rows of `units` packs of N T's: when
// PlanSplitRows splits them over clusters (few wide rows, sm_90+),
// launch(items, sp, &launched) launches the op's split kernel with `items`
// packs a thread (a std::integral_constant) through LaunchSplitRows.
// Returns the launch's result when that settled the call; nullopt when the
// launcher goes on to its one-block-a-row plans (no split planned, or the
// device refused the clusters).
template <typename T, int N, typename F>
std::optional<cudaError_t> LaunchPlannedSplitRows(int64_t rows, int64_t units, int sm_count, int cc,
                                                  F&& launch) {
  const SplitRowPlan sp =
      PlanSplitRows(rows, units, N * static_cast<int>(sizeof(T)), kMaxItems<N>, sm_count, cc);
  if (sp.cluster <= 0) return std::nullopt;
  bool launched = false;
  const cudaError_t e = DispatchItems<kMaxItems<N>>(
      sp.items, [&](auto items) { return launch(items, sp, &launched); });
  if (e != cudaSuccess || launched) return e;
  return std::nullopt;
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda
