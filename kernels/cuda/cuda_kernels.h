// CUDA launchers: take the validated KernelContext, launch on ctx.stream.
// Compiled only when KERNELD_WITH_CUDA; this header stays free of CUDA
// headers so that op files (plain C++) can reference the launchers.
#pragma once

#include <optional>
#include <string>

#include "kerneld/op.h"

namespace kerneld::cuda {

Status Scale(KernelContext& ctx);
Status Rope(KernelContext& ctx);
Status Softmax(KernelContext& ctx);
Status TopKTopPSampling(KernelContext& ctx);
Status GemmCublas(KernelContext& ctx);  // cuBLASLt
// Why the cublas impl cannot run here (libcublasLt not loadable), if so.
std::optional<std::string> CublasUnavailable(const KernelContext& ctx);
// Loads cuBLASLt and creates the calling thread's handle and workspace for
// dev (ImplDef::thread_warm_up); errors are left for GemmCublas to report.
void WarmUpCublas(const DeviceInfo& dev);
// Whether the calling thread has its cuBLASLt handle for that device.
bool CublasThreadReady(int device);
Status GemmDecode(KernelContext& ctx);  // hand-written, M <= 32
Status Add(KernelContext& ctx);
Status RmsNorm(KernelContext& ctx);
Status FusedAddRmsNorm(KernelContext& ctx);
Status LayerNorm(KernelContext& ctx);
Status SiluAndMul(KernelContext& ctx);
Status GeluAndMul(KernelContext& ctx);
Status GeluTanhAndMul(KernelContext& ctx);
Status TestFault(KernelContext& ctx);  // test only: faults the device
Status TestSleep(KernelContext& ctx);  // test only: holds the stream

}  // namespace kerneld::cuda
