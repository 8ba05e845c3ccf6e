// CPU implementations: the reference for every test and the fallback where no
// GPU is present. Each takes the validated KernelContext of its op.
#pragma once

#include "kerneld/op.h"

namespace kerneld::cpu {

Status Scale(KernelContext& ctx);

}  // namespace kerneld::cpu
