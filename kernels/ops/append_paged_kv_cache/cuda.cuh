// append_paged_kv_cache on CUDA: one warp per (entry, kv head) copies the
// head's key and value rows into their page slots in 16-byte units (the
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

__global__ void AppendKernel(AppendParams p) {
  if (p.err != nullptr && *p.err != 0) return;
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  const int64_t units = p.row_bytes / 16;
  for (int64_t w = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; w < p.nnz * p.hkv;
       w += warps) {
    const int64_t i = w / p.hkv, h = w % p.hkv;
    const int b = static_cast<int>(attention::Clamp64(p.batch_indices[i], 0, p.batch - 1));
    const attention::KvRange r = attention::RangeOf(p.kv, b);
    if (r.len == 0) continue;
    const int64_t pos = attention::Clamp64(p.positions[i], 0, r.len - 1);
    const int64_t tok = attention::TokenOf(p.kv, r, pos);
    const int64_t dst = (tok * p.hkv + h) * p.row_bytes, src = (i * p.hkv + h) * p.row_bytes;
    for (int64_t u = lane; u < units; u += 32) {
      reinterpret_cast<uint4*>(p.k_cache + dst)[u] =
          __ldg(reinterpret_cast<const uint4*>(p.key + src) + u);
      reinterpret_cast<uint4*>(p.v_cache + dst)[u] =
          __ldg(reinterpret_cast<const uint4*>(p.value + src) + u);
    }
  }
}

#ifndef __CUDACC_RTC__

inline cudaError_t Append(const AppendParams& p, int sm_count, cudaStream_t s) {
  const int64_t warps = p.nnz * p.hkv;
  if (warps == 0 || p.batch == 0) return cudaSuccess;
  int64_t blocks = (warps + 7) / 8;  // 8 warps a block
  if (blocks > 16 * int64_t{sm_count}) blocks = 16 * int64_t{sm_count};
  AppendKernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(p);
  return cudaGetLastError();
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::append
