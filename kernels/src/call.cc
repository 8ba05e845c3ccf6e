// The one call path: prepare, lay out, check aliasing, stage, call.
#include "kerneld/call.h"

#include "kerneld/check.h"
#include "kerneld/size.h"

namespace kerneld {

Status PrepareAttrs(const OpDef& op, const AttrMap& given, KernelContext* ctx) {
  ctx->op = &op;
  return ResolveAttrs(op, given, &ctx->attrs);
}

Status PrepareInputs(const KernelContext& ctx, std::vector<OutputSpec>* specs) {
  ShapeBindings bind;
  KERNELD_RETURN_IF_ERROR(ValidateInputs(*ctx.op, ctx.inputs, ctx.attrs, &bind));
  return InferOutputs(*ctx.op, ctx.inputs, ctx.attrs, bind, specs);
}

Status Prepare(const OpDef& op, const AttrMap& given, KernelContext* ctx,
               std::vector<OutputSpec>* specs) {
  KERNELD_RETURN_IF_ERROR(PrepareAttrs(op, given, ctx));
  return PrepareInputs(*ctx, specs);
}

int OutputSource(const OpDef& op, size_t i, const std::string& alias) {
  const OutputDef& od = op.outputs[i];
  if (!od.in_place_of.empty()) return op.InputIndex(od.in_place_of);
  if (!alias.empty() && od.name == alias && !od.may_alias.empty())
    return op.InputIndex(od.may_alias);
  return -1;
}

Status LayOutOutputs(const std::vector<OutputSpec>& specs, const std::string& alias,
                     std::span<const OutputPlace> placed, KernelContext* ctx) {
  const OpDef& op = *ctx->op;
  ctx->outputs.assign(op.outputs.size(), TensorView{});
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    TensorView& v = ctx->outputs[i];
    v.dtype = specs[i].dtype;
    v.shape = specs[i].shape;
    const int src = OutputSource(op, i, alias);
    const TensorView* in = src >= 0 ? &ctx->inputs[static_cast<size_t>(src)] : nullptr;
    v.data = in ? in->data : placed[i].data;
    v.byte_offset = in ? in->byte_offset : placed[i].byte_offset;
    v.device = in ? in->device : placed[i].device;
  }
  return CheckAliasing(*ctx);
}

Status LayOutOutputs(const std::vector<OutputSpec>& specs, const std::string& alias,
                     const OutputAllocator& alloc, KernelContext* ctx) {
  const OpDef& op = *ctx->op;
  const Device device = ctx->inputs.empty() ? Device::Cpu() : ctx->inputs[0].device;
  std::vector<OutputPlace> placed(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (OutputSource(op, i, alias) >= 0) continue;
    const int64_t bytes = CheckedBytes(specs[i].shape, specs[i].dtype).value_or(0);
    placed[i].data = alloc(specs[i], bytes);
    placed[i].device = device;
    if (placed[i].data == nullptr && bytes > 0)
      return ResourceExhausted(op.name + ": cannot allocate output '" + op.outputs[i].name + "'");
  }
  return LayOutOutputs(specs, alias, placed, ctx);
}

Status PrepareCall(const OpDef& op, const AttrMap& given, const std::string& alias,
                   const OutputAllocator& alloc, KernelContext* ctx) {
  std::vector<OutputSpec> specs;
  KERNELD_RETURN_IF_ERROR(Prepare(op, given, ctx, &specs));
  return LayOutOutputs(specs, alias, alloc, ctx);
}

Status CheckAliasing(const KernelContext& ctx) {
  const OpDef& op = *ctx.op;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const OutputDef& od = op.outputs[i];
    const TensorView& o = ctx.outputs[i];
    if (!od.in_place_of.empty()) continue;
    for (size_t j = 0; j < ctx.inputs.size(); ++j) {
      const TensorView& in = ctx.inputs[j];
      if (!o.Overlaps(in)) continue;
      if (od.may_alias == op.inputs[j].name && o.SameMemory(in)) continue;
      return InvalidArgument(op.name + ": output '" + od.name + "' overlaps input '" +
                             op.inputs[j].name + "' in its buffer" +
                             (od.may_alias == op.inputs[j].name
                                  ? " without covering exactly the same bytes"
                                  : "; this op cannot write over that input"));
    }
    for (size_t j = 0; j < i; ++j)
      if (o.Overlaps(ctx.outputs[j]))
        return InvalidArgument(op.name + ": outputs '" + op.outputs[j].name + "' and '" + od.name +
                               "' overlap");
  }
  return Status::Ok();
}

StagingLayout LayOutStaging(const KernelContext& ctx, int64_t align,
                            std::span<int64_t> input_offset, std::span<int64_t> output_offset) {
  const auto round_up = [align](int64_t v) { return (v + align - 1) / align * align; };
  StagingLayout l;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    input_offset[i] = -1;
    if (!ctx.inputs[i].device.is_cpu()) continue;
    input_offset[i] = l.total;
    l.total += round_up(ctx.inputs[i].nbytes());
  }
  l.input_bytes = l.total;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    output_offset[i] = -1;
    const TensorView& o = ctx.outputs[i];
    if (!o.device.is_cpu()) continue;
    // Written over a staged input (the same memory): that input's slot. The
    // may_alias source counts too, so an aliased pair stays one memory.
    const OutputDef& od = ctx.op->outputs[i];
    const std::string& over = !od.in_place_of.empty() ? od.in_place_of : od.may_alias;
    if (const int src = over.empty() ? -1 : ctx.op->InputIndex(over);
        src >= 0 && input_offset[static_cast<size_t>(src)] >= 0 &&
        o.raw() == ctx.inputs[static_cast<size_t>(src)].raw()) {
      output_offset[i] = input_offset[static_cast<size_t>(src)];
      continue;
    }
    output_offset[i] = l.total;
    l.total += round_up(o.nbytes());
  }
  return l;
}

Status RunDeferred(KernelContext* ctx) {
  if (!ctx->deferred) return Status::Ok();
  std::function<Status()> check = std::move(ctx->deferred);
  ctx->deferred = nullptr;
  return check();
}

Status Call(const ImplDef& impl, KernelContext& ctx) {
  if (auto why = impl.requires_.RejectRequest(ctx)) return FailedPrecondition(*why);
  return impl.fn(ctx);
}

}  // namespace kerneld
