// The graph's arena and copies on a CUDA device, ordered on the request's
// stream (graph_device.h). Linked only into CUDA builds.
#include <cuda_runtime.h>

#include <string>

#include "graph/graph_device.h"
#include "kerneld/size.h"

namespace kerneld::server {

namespace {

std::string ErrText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

class CudaOps final : public GraphDeviceOps {
 public:
  void* Alloc(const KernelContext& ctx, int64_t bytes, Status* error) const override {
    void* p = nullptr;
    // From the device's default pool (its release threshold is raised by
    // the CUDA worker): the arena of a repeated graph comes back from the
    // pool, not from the driver.
    if (cudaError_t e =
            cudaMallocAsync(&p, static_cast<size_t>(bytes), static_cast<cudaStream_t>(ctx.stream));
        e != cudaSuccess) {
      cudaGetLastError();
      *error = ResourceExhausted("graph: cannot allocate " + HumanBytes(bytes) +
                                 " for intermediates on " + ctx.device.device.ToString() + ": " +
                                 ErrText(e));
      return nullptr;
    }
    return p;
  }
  void Free(const KernelContext& ctx, void* p) const override {
    // Stream-ordered: the memory returns to the pool once every kernel
    // launched before this point on the stream has run.
    cudaFreeAsync(p, static_cast<cudaStream_t>(ctx.stream));
  }
  Status Copy(const KernelContext& ctx, void* dst, const void* src, int64_t bytes) const override {
    if (dst == src || bytes <= 0) return Status::Ok();
    if (cudaError_t e =
            cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                            static_cast<cudaStream_t>(ctx.stream));
        e != cudaSuccess)
      return Internal("graph: copying an in-place input on " + ctx.device.device.ToString() + ": " +
                      ErrText(e));
    return Status::Ok();
  }
};

}  // namespace

const GraphDeviceOps* CudaGraphOps() {
  static const CudaOps ops;
  return &ops;
}

}  // namespace kerneld::server
