// append_paged_kv_cache on CUDA: one warp per entry copies its key and
// value rows (every kv head) into their page slot in 16-byte units (the
// binding requires 16-byte aligned rows). The copy is of bytes: no dtype.
// Indices are re-read and clamped here, and a set *err (the index check's
// flag) makes every warp return before writing anything.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/attention/attend.cuh"

namespace kerneld::cuda::append {

struct AppendParams {
  const char* key = nullptr;  // [nnz, hkv, row_bytes]
  const char* value = nullptr;
  char* k_cache = nullptr;  // [max_pages, page_size, hkv, row_bytes]
  char* v_cache = nullptr;
  const int32_t* batch_indices = nullptr;
  const int32_t* positions = nullptr;
  attention::KvIndex kv;
  const int* err = nullptr;
  int64_t nnz = 0;
  int batch = 0, hkv = 1;
  int64_t row_bytes = 0;  // one head: head_dim * item size, a multiple of 16
};

// One warp per entry: its heads' rows are contiguous in append_key and in
// the page slot (hkv * row_bytes bytes each side), so the warp finds the
// slot once and copies the entry's keys and values kUnroll 16-byte units a
// lane at a time, every load issued before the stores (bytes in flight are
// what a copy's speed is made of).
__global__ void __launch_bounds__(256) AppendKernel(AppendParams p) {
  if (p.err != nullptr && *p.err != 0) return;
  constexpr int kUnroll = 4;
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  const int64_t units = p.hkv * p.row_bytes / 16;  // of the entry, each side
  for (int64_t i = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; i < p.nnz; i += warps) {
    const int b = static_cast<int>(attention::Clamp64(p.batch_indices[i], 0, p.batch - 1));
    const attention::KvRange r = attention::RangeOf(p.kv, b);
    if (r.len == 0) continue;
    const int64_t pos = attention::Clamp64(p.positions[i], 0, r.len - 1);
    const int64_t tok = attention::TokenOf(p.kv, r, pos);
    const uint4* ks = reinterpret_cast<const uint4*>(p.key + i * p.hkv * p.row_bytes);
    const uint4* vs = reinterpret_cast<const uint4*>(p.value + i * p.hkv * p.row_bytes);
    uint4* kd = reinterpret_cast<uint4*>(p.k_cache + tok * p.hkv * p.row_bytes);
    uint4* vd = reinterpret_cast<uint4*>(p.v_cache + tok * p.hkv * p.row_bytes);
    for (int64_t u0 = lane; u0 < units; u0 += 32 * kUnroll) {
      uint4 k[kUnroll], v[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j)
        if (u0 + j * 32 < units) k[j] = __ldg(ks + u0 + j * 32), v[j] = __ldg(vs + u0 + j * 32);
#pragma unroll
      for (int j = 0; j < kUnroll; ++j)
        if (u0 + j * 32 < units) kd[u0 + j * 32] = k[j], vd[u0 + j * 32] = v[j];
    }
  }
}

#ifndef __CUDACC_RTC__

inline cudaError_t Append(const AppendParams& p, int sm_count, cudaStream_t s) {
  if (p.nnz == 0 || p.hkv == 0 || p.batch == 0) return cudaSuccess;
  int64_t blocks = (p.nnz + 7) / 8;  // 8 warps a block, a warp an entry
  if (blocks > 8 * int64_t{sm_count}) blocks = 8 * int64_t{sm_count};  // the rest loop
  AppendKernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(p);
  return cudaGetLastError();
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::append
