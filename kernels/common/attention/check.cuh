// The attention ops' index check on the device: the conditions of
// common/attention/indices.h, tested in parallel over the index arrays;
// any failure sets *err, which every attention kernel reads first (and
// returns). The binding (cuda_binding.cuh) reads the flag back after the
// kernels and, when set, words the message from a host copy of the arrays
// with indices.h itself.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kerneld::cuda::attention {

struct CheckParams {
  int batch = 0;
  // kv_indptr: exact (ragged: 0 .. kv_total) or within [0, kv_total]
  // (paged: kv_total = entries of kv_indices).
  const int32_t* kv_indptr = nullptr;
  bool kv_exact = false;
  int64_t kv_total = 0;
  const int32_t* kv_indices = nullptr;  // paged only
  const int32_t* last_page_len = nullptr;
  int64_t max_pages = 0;
  int64_t page_size = 1;
  const int32_t* qo_indptr = nullptr;  // exact over qo_total rows; nullptr: none
  int64_t qo_total = 0;
  const int32_t* batch_indices = nullptr;  // append only
  const int32_t* positions = nullptr;
  int64_t nnz_append = 0;
  int* err = nullptr;       // device memory, read by the op's kernels
  int* host_err = nullptr;  // mapped pinned memory the binding reads (nullptr: none), zeroed
};

// Up to this many entries to check, one block checks them all and zeroes
// *err itself first (no memset before it: one operation on the stream
// fewer, which is most of a small call's time). Above it, the block's
// threads would walk too many entries one after another (an append entry
// is four dependent loads): 8192 entries took 20 us of a 33 us append on
// the H200.
inline constexpr int64_t kOneBlockCheck = 2048;

__device__ __forceinline__ bool BadIndptr(const int32_t* ip, int64_t t, int batch, int64_t total,
                                          bool exact) {
  if (t == 0 && (exact ? ip[0] != 0 : ip[0] < 0)) return true;
  if (t < batch && (ip[t + 1] < ip[t] || ip[t + 1] > total)) return true;
  return exact && t == batch && ip[batch] != total;
}

// static: each op's cuda.cu that includes this header gets its own copy (one
// definition per translation unit, not one for the library).
static __global__ void CheckIndicesKernel(CheckParams p, bool zero_first) {
  const int64_t n = max(max(int64_t{p.batch} + 1, p.kv_indices ? p.kv_total : 0), p.nnz_append);
  if (zero_first) {  // one block: its threads set the flag only after this
    if (threadIdx.x == 0) *p.err = 0;
    __syncthreads();
  }
  bool bad = false;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < n;
       t += int64_t{gridDim.x} * blockDim.x) {
    if (t <= p.batch) {
      bad |= BadIndptr(p.kv_indptr, t, p.batch, p.kv_total, p.kv_exact);
      if (p.qo_indptr) bad |= BadIndptr(p.qo_indptr, t, p.batch, p.qo_total, true);
      if (p.kv_indices && t < p.batch && p.kv_indptr[t + 1] > p.kv_indptr[t] &&
          (p.last_page_len[t] < 1 || p.last_page_len[t] > p.page_size))
        bad = true;
    }
    // Entries some request reads (when the indptr is good: [indptr[0], indptr[batch])).
    if (p.kv_indices && t < p.kv_total && t >= p.kv_indptr[0] && t < p.kv_indptr[p.batch] &&
        (p.kv_indices[t] < 0 || p.kv_indices[t] >= p.max_pages))
      bad = true;
    if (t < p.nnz_append) {
      const int32_t b = p.batch_indices[t];
      if (b < 0 || b >= p.batch) {
        bad = true;
      } else {
        const int64_t pages = int64_t{p.kv_indptr[b + 1]} - p.kv_indptr[b];
        const int64_t len = pages <= 0 ? 0 : (pages - 1) * p.page_size + p.last_page_len[b];
        if (p.positions[t] < 0 || p.positions[t] >= len) bad = true;
      }
    }
  }
  if (bad) {
    *p.err = 1;
    if (p.host_err != nullptr) *p.host_err = 1;
  }
}

#ifndef __CUDACC_RTC__

// Launches the check: *p.err zeroed (by the kernel itself when one block
// takes every entry, else by a memset before it), then set where an index
// is bad, and *p.host_err with it.
inline cudaError_t CheckIndices(const CheckParams& p, int sm_count, cudaStream_t s) {
  const int64_t n = p.batch + 1 + p.kv_total + p.nnz_append;
  if (n <= kOneBlockCheck) {
    CheckIndicesKernel<<<1, 1024, 0, s>>>(p, true);
    return cudaGetLastError();
  }
  if (cudaError_t e = cudaMemsetAsync(p.err, 0, sizeof(int), s); e != cudaSuccess) return e;
  int64_t blocks = (n + 255) / 256;
  if (blocks > 4 * int64_t{sm_count}) blocks = 4 * int64_t{sm_count};
  CheckIndicesKernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(p, false);
  return cudaGetLastError();
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::attention
