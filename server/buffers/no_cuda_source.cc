// CUDA buffer sources for builds without CUDA.
#include "buffers/buffer_sources.h"

namespace kerneld::server {

Status OpenCudaIpc(const std::string& handle, const DeviceInfo&, uint64_t, std::shared_ptr<Region>*) {
  return FailedPrecondition("this kerneld was built without CUDA (KERNELD_CUDA=OFF): no CUDA IPC buffers");
}
Status AllocateCuda(const DeviceInfo&, uint64_t, std::shared_ptr<Region>*, std::string*) {
  return FailedPrecondition("this kerneld was built without CUDA (KERNELD_CUDA=OFF): no GPU buffers");
}
bool CudaMemInfo(int, uint64_t*, uint64_t*) { return false; }

}  // namespace kerneld::server
