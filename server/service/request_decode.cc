#include "service/request_decode.h"

#include <cstring>
#include <string>

#include "kerneld/check.h"
#include "kerneld/size.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

// "{a, b}"
std::string NameList(const std::vector<std::string>& v) { return "{" + Join(v) + "}"; }

// Where a BufferRef points, checked: the region, its device, the pointer.
Status ResolveRef(BufferRegistry* reg, const Principal& who, WhatFn what, const v1::BufferRef& ref,
                  int64_t nbytes, DType dt, DecodedRequest* d, TensorView* v) {
  if (reg == nullptr)
    return {StatusCode::kUnimplemented, what() + ": this server has no buffer registry"};
  RegionPin pin;
  char* p = nullptr;
  Status st =
      reg->Resolve(who, ref.buffer_id(), ref.offset(), static_cast<uint64_t>(nbytes), dt, &pin, &p);
  if (!st.ok()) return Status(st.code(), what() + ": " + st.message());
  v->data = p;
  v->byte_offset = 0;
  v->device = pin.region()->device;
  d->pins.push_back(std::move(pin));
  return Status::Ok();
}

}  // namespace

Status DecodeRequest(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                     const DecodeOptions& opt, BufferRegistry* reg, const Principal& who,
                     DecodedRequest* d) {
  const bool test_ops = opt.test_ops;
  const OpDef* op = OpRegistry::Global().Find(req.op());
  if (op != nullptr && op->test_only() && !test_ops) op = nullptr;
  if (op == nullptr) {
    std::vector<std::string> names;
    for (const OpDef* o : OpRegistry::Global().List())
      if (!o->test_only() || test_ops) names.push_back(o->name);
    if (req.op().empty())
      return InvalidArgument("ExecuteRequest.op is empty; ops are " + NameList(names));
    return NotFound("unknown op " + Quote(req.op()) + "; this server has " + NameList(names) +
                    " (ListKernels describes them)");
  }
  KernelContext& call = d->call;
  call.op = op;

  AttrMap given;
  for (const auto& [name, v] : req.attrs()) {
    AttrValue a;
    // A plain reference: lambdas may not capture structured bindings (before
    // C++20 in clang, which the sanitizer build uses).
    const std::string& attr = name;
    KERNELD_RETURN_IF_ERROR(FromProto([&] { return op->name + ": attr " + Quote(attr); }, v, &a));
    given.emplace(name, std::move(a));
  }
  // The library's call path (kerneld/call.h): attrs first, so an attr error
  // is reported before any tensor is decoded.
  KERNELD_RETURN_IF_ERROR(PrepareAttrs(*op, given, &call));

  // Inputs, in schema order; a missing one keeps dtype kInvalid and is
  // reported by ValidateInputs.
  call.inputs.assign(op->inputs.size(), TensorView{});
  for (const auto& [name, t] : req.inputs()) {
    int idx = op->InputIndex(name);
    if (idx < 0) {
      std::vector<std::string> names;
      for (const auto& i : op->inputs) names.push_back(i.name);
      return InvalidArgument(op->name + ": unknown input " + Quote(name) + "; inputs are " +
                             NameList(names));
    }
    // Formatted only for an error: the success path builds no string.
    const std::string& input = name;  // not captured as a binding (see attrs)
    auto what = [&] { return op->name + ": input '" + input + "'"; };
    int64_t nbytes = 0;
    KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
    TensorView& v = call.inputs[static_cast<size_t>(idx)];
    v.dtype = FromProto(t.dtype());
    v.shape.assign(t.shape().begin(), t.shape().end());
    v.device = Device::Cpu();
    switch (t.data_case()) {
      case v1::Tensor::kInlineData: {
        const std::string& bytes = t.inline_data();
        d->bytes_in_inline += bytes.size();
        if (static_cast<int64_t>(bytes.size()) != nbytes)
          return InvalidArgument(what() + ": inline_data has " + std::to_string(bytes.size()) +
                                 " bytes; " + std::string(DTypeName(v.dtype)) + " " +
                                 ShapeToString(v.shape) + " needs " + std::to_string(nbytes) +
                                 " (elements x itemsize)");
        if (reinterpret_cast<uintptr_t>(bytes.data()) % ItemSize(v.dtype) != 0) {
          // Protobuf gives no alignment promise; kernels need natural alignment.
          char* p = d->scratch.Alloc(bytes.size());
          std::memcpy(p, bytes.data(), bytes.size());
          v.data = p;
        } else {
          v.data = const_cast<char*>(bytes.data());  // read-only use
        }
        break;
      }
      case v1::Tensor::kBuffer:
        KERNELD_RETURN_IF_ERROR(ResolveRef(reg, who, what, t.buffer(), nbytes, v.dtype, d, &v));
        d->bytes_in_buffer += static_cast<uint64_t>(nbytes);
        break;
      case v1::Tensor::DATA_NOT_SET:
        if (nbytes != 0)
          return InvalidArgument(what() + " has no data; set inline_data (" +
                                 std::to_string(nbytes) + " bytes) or buffer");
        v.data = d->scratch.Alloc(0);
        break;
    }
  }

  // Validation and output inference: the library's, on the call itself.
  std::vector<OutputSpec> specs;
  KERNELD_RETURN_IF_ERROR(PrepareInputs(call, &specs));

  for (const auto& [name, t] : req.outputs()) {
    int idx = op->OutputIndex(name);
    if (idx < 0) {
      std::vector<std::string> names;
      for (const auto& o : op->outputs) names.push_back(o.name);
      return InvalidArgument(op->name + ": unknown output " + Quote(name) + "; outputs are " +
                             NameList(names));
    }
    const std::string& output = name;  // not captured as a binding (see attrs)
    auto what = [&] { return op->name + ": output '" + output + "'"; };
    int64_t nbytes = 0;
    KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
    TensorView declared;
    declared.dtype = FromProto(t.dtype());
    declared.shape.assign(t.shape().begin(), t.shape().end());
    KERNELD_RETURN_IF_ERROR(CheckOutput(*op, idx, specs[static_cast<size_t>(idx)], declared));
    if (t.data_case() == v1::Tensor::kBuffer &&
        !op->outputs[static_cast<size_t>(idx)].in_place_of.empty())
      return InvalidArgument(what() + " is written in place of input '" +
                             op->outputs[static_cast<size_t>(idx)].in_place_of +
                             "'; it cannot be placed elsewhere (leave it out of outputs)");
    if (t.data_case() == v1::Tensor::kInlineData)
      return InvalidArgument(what() +
                             ": outputs take no inline_data; leave data unset to receive "
                             "the result inline, or name a buffer to have it written there");
  }

  // Sizes first, allocation after: the inline outputs must fit in one
  // response (--max_message_mb) and the request's memory in the daemon's
  // budget (--max_inflight_mb) before a single output byte is allocated.
  // InferOutputs checked every output's size, so these products are exact.
  std::vector<int64_t> out_bytes(op->outputs.size(), 0);
  int64_t inline_out = 0;
  size_t biggest = op->outputs.size();  // named in the error only
  for (size_t i = 0; i < op->outputs.size(); ++i) {
    const OutputDef& od = op->outputs[i];
    out_bytes[i] = CheckedBytes(specs[i].shape, specs[i].dtype).value_or(kMaxTensorBytes);
    auto placed = req.outputs().find(od.name);
    const bool in_buffer =
        (!od.in_place_of.empty() &&
         req.inputs().at(od.in_place_of).data_case() == v1::Tensor::kBuffer) ||
        (placed != req.outputs().end() && placed->second.data_case() == v1::Tensor::kBuffer);
    if (in_buffer) continue;
    inline_out += out_bytes[i];
    if (biggest == op->outputs.size() || out_bytes[i] * 2 > inline_out) biggest = i;
  }
  if (opt.max_inline_out_bytes > 0 && inline_out > opt.max_inline_out_bytes)
    return ResourceExhausted(
        op->name + ": the inline result would be " + HumanBytes(inline_out) + " (output '" +
        op->outputs[biggest].name + "' " + std::string(DTypeName(specs[biggest].dtype)) + " " +
        ShapeToString(specs[biggest].shape) + "); a response holds at most " +
        HumanBytes(opt.max_inline_out_bytes) +
        " (--max_message_mb). Place the output in a registered buffer, or split the request");
  if (opt.budget != nullptr) {
    const int64_t held = static_cast<int64_t>(d->bytes_in_inline) + inline_out;
    if (!opt.budget->TryReserve(held, &d->memory))
      return ResourceExhausted(op->name + ": kerneld is holding " + HumanBytes(opt.budget->used()) +
                               " for requests in flight and this one needs " + HumanBytes(held) +
                               "; the limit is " + HumanBytes(opt.budget->limit()) +
                               " (--max_inflight_mb). Retry with backoff");
  }

  // Outputs are computed straight into the response's bytes (no extra copy).
  // An in-place output starts as a copy of its input, and the kernel then
  // reads and writes that copy: the request's bytes are never modified.
  call.outputs.assign(op->outputs.size(), TensorView{});
  for (size_t i = 0; i < op->outputs.size(); ++i) {
    const OutputDef& od = op->outputs[i];
    const OutputSpec& spec = specs[i];
    v1::Tensor& out = (*resp->mutable_outputs())[od.name];
    out.set_dtype(ToProto(spec.dtype));
    for (int64_t s : spec.shape) out.add_shape(s);
    const int64_t nbytes = out_bytes[i];
    TensorView& v = call.outputs[i];
    v.dtype = spec.dtype;
    v.shape = spec.shape;
    v.device = Device::Cpu();
    auto placed = req.outputs().find(od.name);
    const bool in_buffer =
        (!od.in_place_of.empty() &&
         req.inputs().at(od.in_place_of).data_case() == v1::Tensor::kBuffer) ||
        (placed != req.outputs().end() && placed->second.data_case() == v1::Tensor::kBuffer);
    (in_buffer ? d->bytes_out_buffer : d->bytes_out_inline) += static_cast<uint64_t>(nbytes);
    if (!od.in_place_of.empty()) {
      const int in_idx = op->InputIndex(od.in_place_of);
      TensorView& in = call.inputs[static_cast<size_t>(in_idx)];
      const v1::Tensor& in_t = req.inputs().at(od.in_place_of);
      if (in_t.data_case() == v1::Tensor::kBuffer) {
        *out.mutable_buffer() = in_t.buffer();  // written in place, in the client's buffer
        v.data = in.data;
        v.byte_offset = in.byte_offset;
        v.device = in.device;
      } else {
        std::string* bytes = out.mutable_inline_data();
        bytes->assign(static_cast<const char*>(in.raw()), static_cast<size_t>(in.nbytes()));
        in.data = bytes->data();
        in.byte_offset = 0;
        v.data = bytes->data();
      }
    } else if (placed != req.outputs().end() && placed->second.data_case() == v1::Tensor::kBuffer) {
      KERNELD_RETURN_IF_ERROR(ResolveRef(
          reg, who, [&] { return op->name + ": output '" + od.name + "'"; },
          placed->second.buffer(), nbytes, spec.dtype, d, &v));
      *out.mutable_buffer() = placed->second.buffer();
    } else {
      std::string* bytes = out.mutable_inline_data();
      bytes->resize(static_cast<size_t>(nbytes));
      v.data = bytes->data();
    }
  }
  // Outputs placed in buffers must not partly overlap inputs or each other
  // (kerneld/call.h, CheckAliasing, says why).
  return CheckAliasing(call);
}

}  // namespace kerneld::server
