// CUDA launchers: take the validated KernelContext, launch on ctx.stream.
// Compiled only when KERNELD_WITH_CUDA; this header stays free of CUDA
// headers so that op files (plain C++) can reference the launchers.
#pragma once

#include "kerneld/op.h"

namespace kerneld::cuda {

Status Scale(KernelContext& ctx);
Status TestFault(KernelContext& ctx);  // test only: faults the device
Status TestSleep(KernelContext& ctx);  // test only: holds the stream

}  // namespace kerneld::cuda
