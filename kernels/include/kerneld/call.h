// The one call path from a request to a kernel: Prepare validates a request
// against its op's schema (attrs, dtypes, symbolic shapes, extra checks) and
// infers its outputs; LayOutOutputs places them (in place, aliased, or
// fresh memory); CheckAliasing enforces the overlap rules; Call runs one
// implementation. The server (service/request_decode.cc lays out outputs in
// the response, the device workers call), the test runners
// (kernels/testing/op_runner.h, gpu_util.h) and bench/kernel_bench.cu all
// go through here, so each rule is written once.
//
// A request keeps one form throughout: the KernelContext these fill is the
// one the scheduler ranks and the worker hands to the implementation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kerneld/op.h"

namespace kerneld {

// Sets ctx->op and resolves `given` into ctx->attrs (defaults filled in).
// Separate from PrepareInputs so a caller can report attr errors before it
// decodes a single tensor (the server does).
Status PrepareAttrs(const OpDef& op, const AttrMap& given, KernelContext* ctx);

// Validates ctx->inputs (schema order; a missing one has dtype kInvalid)
// with ctx->attrs, and computes each output's dtype and shape.
Status PrepareInputs(const KernelContext& ctx, std::vector<OutputSpec>* specs);

// PrepareAttrs then PrepareInputs.
Status Prepare(const OpDef& op, const AttrMap& given, KernelContext* ctx,
               std::vector<OutputSpec>* specs);

// Memory for one output of `bytes` bytes (a device's, or the host's).
using OutputAllocator = std::function<void*(const OutputSpec& spec, int64_t bytes)>;

// Lays out ctx->outputs from specs: an in-place output is its input's
// memory; the output named `alias` (if any) is written over its may_alias
// input; every other output gets alloc()'s memory, on the device of the
// inputs. Then CheckAliasing.
Status LayOutOutputs(const std::vector<OutputSpec>& specs, const std::string& alias,
                     const OutputAllocator& alloc, KernelContext* ctx);

// Outputs must not partly overlap inputs or each other: a kernel may read an
// element after another thread overwrote it. Exact aliasing is allowed
// where the schema says so (in place, may_alias).
Status CheckAliasing(const KernelContext& ctx);

// Runs `impl` on a prepared context (device, stream and pool set by the
// caller). A request the impl's requirements refuse is FAILED_PRECONDITION
// with the reason, and never reaches the kernel.
Status Call(const ImplDef& impl, KernelContext& ctx);

}  // namespace kerneld
