// What running a graph needs of a device beyond its kernels: the arena's
// memory and the copies that start an in-place output. The host's are
// plain memory; CUDA's are stream-ordered (cudaMallocAsync / cudaFreeAsync /
// cudaMemcpyAsync on the request's stream), so a block freed after its last
// reader is reused by the pool without a synchronize. A build without CUDA
// links graph_no_cuda.cc instead of graph_cuda.cc (no #ifdef).
#pragma once

#include <cstdint>

#include "kerneld/op.h"

namespace kerneld::server {

class GraphDeviceOps {
 public:
  virtual ~GraphDeviceOps() = default;
  // `bytes` (> 0) on ctx's device; nullptr with *error set when it fails.
  virtual void* Alloc(const KernelContext& ctx, int64_t bytes, Status* error) const = 0;
  virtual void Free(const KernelContext& ctx, void* p) const = 0;
  // Copies `bytes` within ctx's device (the ranges may be the same).
  virtual Status Copy(const KernelContext& ctx, void* dst, const void* src,
                      int64_t bytes) const = 0;
};

const GraphDeviceOps& HostGraphOps();
// nullptr when this build has no CUDA.
const GraphDeviceOps* CudaGraphOps();

}  // namespace kerneld::server
