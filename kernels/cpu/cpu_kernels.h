// CPU implementations: the reference for every test and the fallback where no
// GPU is present. Each takes the validated KernelContext of its op.
#pragma once

#include "kerneld/op.h"

namespace kerneld::cpu {

Status Scale(KernelContext& ctx);
Status Rope(KernelContext& ctx);
Status Softmax(KernelContext& ctx);
Status TopKTopPSampling(KernelContext& ctx);
Status Gemm(KernelContext& ctx);
Status Add(KernelContext& ctx);
Status RmsNorm(KernelContext& ctx);
Status FusedAddRmsNorm(KernelContext& ctx);
Status LayerNorm(KernelContext& ctx);
Status SiluAndMul(KernelContext& ctx);
Status GeluAndMul(KernelContext& ctx);
Status GeluTanhAndMul(KernelContext& ctx);

}  // namespace kerneld::cpu
