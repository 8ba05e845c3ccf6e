// kerneld.v1.AdminService.EvaluateKernel (docs/user-kernels.md): a user
// kernel and a built-in op on the same random inputs, drawn from the
// built-in's schema as kernelctl draws them (kerneld/input_gen.h for the
// index kinds), each compared with the built-in's float64 reference
// (OpDef::reference, as `kernelctl run --check`), and both timed as
// kernel_bench times beside a device copy of the same bytes. Everything
// up to the GPU is checked on the host, so a CPU-only daemon answers a bad
// request as a GPU daemon would, and a good one FAILED_PRECONDITION.
#pragma once

#include "auth/identity.h"
#include "kerneld/v1/kerneld.pb.h"
#include "sandbox/user_kernels.h"

namespace kerneld::server::sandbox {

// The inputs, attrs and checks of `req` for `who`; *ref gets the
// built-in's float64 reference outputs.
Status BuildEvaluateProblem(const UserKernelRegistry& registry, const Principal& who,
                            const v1::EvaluateKernelRequest& req, EvaluateProblem* p,
                            HostTensors* ref);

// The whole RPC. `launcher` null or `has_gpu` false: FAILED_PRECONDITION
// after the host-side checks.
Status EvaluateKernel(const UserKernelRegistry& registry, UserKernelLauncher* launcher,
                      bool has_gpu, const Identity& who, const v1::EvaluateKernelRequest& req,
                      v1::EvaluateKernelResponse* resp);

}  // namespace kerneld::server::sandbox
