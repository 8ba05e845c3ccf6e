// The stream-ordered pool that kernels' scratch comes from (gemm's split-K
// partials, the attention ops' index flag and split-KV partials): one per
// device, made on first use, that keeps up to kRetainedPoolBytes of what
// it frees across a synchronize. The device's default pool has a release
// threshold of 0: it hands its memory back to the driver at every
// synchronize, so each call would map fresh memory, tens of microseconds of
// host time during which the GPU waits (measured: a 16x4096x4096 bf16 gemm
// 73 us against 22 us for cuBLAS; a 1x32x128 decode over 512 keys 63 us).
// The daemon raises the default pool's threshold itself, but a kernel must
// not depend on who calls it (the bench, the tests, a library user).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/cuda/cuda_check.cuh"

namespace kerneld::cuda {

inline constexpr uint64_t kRetainedPoolBytes = uint64_t{256} << 20;

// The pool of `device` (process lifetime).
inline Status RetainedPool(int device, cudaMemPool_t* out) {
  static std::mutex mu;
  static std::map<int, cudaMemPool_t> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools.find(device);
  if (it == pools.end()) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaMemPoolCreate(&pool, &props), "workspace pool"));
    uint64_t retain = kRetainedPoolBytes;
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &retain),
                   "workspace pool threshold"));
    it = pools.emplace(device, pool).first;
  }
  *out = it->second;
  return Status::Ok();
}

// `bytes` from the pool of `device`, ordered on s; RESOURCE_EXHAUSTED
// naming `what` when the device has no memory for it.
inline Status AllocateWorkspace(int device, size_t bytes, cudaStream_t s, const std::string& what,
                                void** out) {
  cudaMemPool_t pool = nullptr;
  KERNELD_RETURN_IF_ERROR(RetainedPool(device, &pool));
  if (cudaError_t e = cudaMallocFromPoolAsync(out, bytes, pool, s); e != cudaSuccess) {
    cudaGetLastError();
    *out = nullptr;
    return ResourceExhausted(what + ": cannot allocate " + std::to_string(bytes) +
                             " bytes of workspace: " + cudaGetErrorString(e));
  }
  return Status::Ok();
}

}  // namespace kerneld::cuda
