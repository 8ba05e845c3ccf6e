// The one call path from a request to a kernel: Prepare validates a request
// against its op's schema (attrs, dtypes, symbolic shapes, extra checks) and
// infers its outputs; LayOutOutputs places them (in place, aliased, or
// memory the caller gives); CheckAliasing enforces the overlap rules;
// LayOutStaging gives the slots of a device's staging arena for the views
// it cannot read; Call runs one implementation. The server
// (service/request_decode.cc places outputs in the response or a client's
// buffer, and LayOutOutputs lays them out; devices/cuda_worker.cc stages host views
// through LayOutStaging; the device workers call), the test harness
// (kernels/testing/op_runner.h, RunOp) and bench/kernel_bench.cu (PrepareCall)
// all go through here, so each rule is written once.
//
// A request keeps one form throughout: the KernelContext these fill is the
// one the scheduler ranks and the worker hands to the implementation.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
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

// The input whose memory output `i` of `op` is written into: its
// in_place_of input, or its may_alias input when it is the output named
// `alias`. -1: the output gets memory of its own.
int OutputSource(const OpDef& op, size_t i, const std::string& alias);

// Where a caller put one output (an output with no OutputSource): its
// memory and the device that memory is on.
struct OutputPlace {
  void* data = nullptr;
  int64_t byte_offset = 0;
  Device device;
};

// Lays out ctx->outputs from specs: an output with an OutputSource is that
// input's memory; every other one is placed[i] (placed has one entry per
// output; the others' are not read). Then CheckAliasing.
Status LayOutOutputs(const std::vector<OutputSpec>& specs, const std::string& alias,
                     std::span<const OutputPlace> placed, KernelContext* ctx);

// Memory for one output of `bytes` bytes (a device's, or the host's); null
// (with bytes > 0) is RESOURCE_EXHAUSTED.
using OutputAllocator = std::function<void*(const OutputSpec& spec, int64_t bytes)>;

// LayOutOutputs with fresh memory from alloc(), on the device of the inputs.
// The test harness and the bench.
Status LayOutOutputs(const std::vector<OutputSpec>& specs, const std::string& alias,
                     const OutputAllocator& alloc, KernelContext* ctx);

// For a caller that holds its inputs' views (ctx->inputs, schema order):
// Prepare, then LayOutOutputs with alloc(). The test harness and the bench.
Status PrepareCall(const OpDef& op, const AttrMap& given, const std::string& alias,
                   const OutputAllocator& alloc, KernelContext* ctx);

// Runs and clears ctx->deferred, the check an impl left when the caller
// set defer_checks (kerneld/context.h): call it after the stream's work is
// done. OK when there is none.
Status RunDeferred(KernelContext* ctx);

// Outputs must not partly overlap inputs or each other: a kernel may read an
// element after another thread overwrote it. Exact aliasing is allowed
// where the schema says so (in place, may_alias).
Status CheckAliasing(const KernelContext& ctx);

// Slots in one staging arena for the views of a laid-out call that live
// in host memory (a device worker copies them to its device): each gets a
// byte offset at an `align` boundary, inputs first (so one copy moves them
// all), and an output written over a staged input (OutputSource, same
// memory) shares its slot. Offsets are written into input_offset and
// output_offset (sized as ctx's views; -1: not staged), so a caller can
// keep them on its stack.
struct StagingLayout {
  int64_t input_bytes = 0;  // the inputs' part, from offset 0
  int64_t total = 0;        // the arena's size; 0: nothing to stage
};
StagingLayout LayOutStaging(const KernelContext& ctx, int64_t align,
                            std::span<int64_t> input_offset, std::span<int64_t> output_offset);

// Runs `impl` on a prepared context (device, stream and pool set by the
// caller). A request the impl's requirements refuse is FAILED_PRECONDITION
// with the reason, and never reaches the kernel.
Status Call(const ImplDef& impl, KernelContext& ctx);

}  // namespace kerneld
