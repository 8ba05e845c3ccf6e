// gemm's cublas backend, for its tests: whether cuBLASLt can be loaded, and
// the per-thread state the worker warms up. Free of CUDA headers.
#pragma once

#include <optional>
#include <string>

#include "kerneld/op.h"

namespace kerneld::cuda {

// c = alpha * a @ b (or a @ b^T) through cuBLASLt.
Status GemmCublas(KernelContext& ctx);

// Why the cublas impl cannot run here (libcublasLt not loadable), if so.
std::optional<std::string> CublasUnavailable(const KernelContext& ctx);
// Loads cuBLASLt and creates the calling thread's handle and workspace for
// dev (ImplDef::thread_warm_up); errors are left for GemmCublas to report.
void WarmUpCublas(const DeviceInfo& dev);
// Whether the calling thread has its cuBLASLt handle for that device.
bool CublasThreadReady(int device);

}  // namespace kerneld::cuda
