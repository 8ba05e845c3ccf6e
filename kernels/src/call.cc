// The one call path: prepare, lay out, check aliasing, call.
#include "kerneld/call.h"

#include "kerneld/check.h"

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

Status LayOutOutputs(const std::vector<OutputSpec>& specs, const std::string& alias,
                     const OutputAllocator& alloc, KernelContext* ctx) {
  const OpDef& op = *ctx->op;
  const Device device = ctx->inputs.empty() ? Device::Cpu() : ctx->inputs[0].device;
  ctx->outputs.assign(op.outputs.size(), TensorView{});
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const OutputDef& od = op.outputs[i];
    TensorView& v = ctx->outputs[i];
    v.dtype = specs[i].dtype;
    v.shape = specs[i].shape;
    v.device = device;
    const std::string& src =
        !od.in_place_of.empty() ? od.in_place_of : (od.name == alias ? od.may_alias : "");
    if (!src.empty()) {
      const TensorView& in = ctx->inputs[static_cast<size_t>(op.InputIndex(src))];
      v.data = in.data;
      v.byte_offset = in.byte_offset;
      v.device = in.device;
    } else {
      v.data = alloc(specs[i], v.nbytes());
      if (v.data == nullptr && v.nbytes() > 0)
        return ResourceExhausted(op.name + ": cannot allocate output '" + od.name + "'");
    }
  }
  return CheckAliasing(*ctx);
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

Status Call(const ImplDef& impl, KernelContext& ctx) {
  if (auto why = impl.requires_.RejectRequest(ctx)) return FailedPrecondition(*why);
  return impl.fn(ctx);
}

}  // namespace kerneld
