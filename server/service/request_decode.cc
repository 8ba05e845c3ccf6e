#include "service/request_decode.h"

#include <cstring>
#include <span>
#include <string>

#include "absl/container/inlined_vector.h"
#include "kerneld/check.h"
#include "kerneld/size.h"
#include "sandbox/user_kernels.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

// "{a, b}"
std::string NameList(const std::vector<std::string>& v) { return "{" + Join(v) + "}"; }

// Where a BufferRef points, checked: the region, its device, the pointer.
Status ResolveRef(BufferRegistry* reg, const Principal& who, WhatFn what, const v1::BufferRef& ref,
                  int64_t nbytes, DType dt, DecodedRequest* d, OutputPlace* v) {
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

// True when output `od` is written into a client's buffer (its own
// placement, or the input it is written in place of), not into the response.
bool InBuffer(const v1::ExecuteRequest& req, const OutputDef& od) {
  if (!od.in_place_of.empty())
    return req.inputs().at(od.in_place_of).data_case() == v1::Tensor::kBuffer;
  auto placed = req.outputs().find(od.name);
  return placed != req.outputs().end() && placed->second.data_case() == v1::Tensor::kBuffer;
}

// The op `req` names, among those this server serves.
Status FindOp(const v1::ExecuteRequest& req, bool test_ops, const Principal& who,
              const OpDef** found) {
  if (req.has_graph())  // ExecuteStream runs it (graph/graph_stream.h); nothing else does
    return InvalidArgument(
        "ExecuteRequest.graph is a graph message, which only ExecuteStream runs; send one graph "
        "to ExecuteGraph");
  const OpDef* op = OpRegistry::Global().Find(req.op());
  if (op != nullptr && op->test_only() && !test_ops) op = nullptr;
  if (op == nullptr)  // a user kernel the caller sees (sandbox/user_kernels.h)
    if (const auto* user = sandbox::UserKernels()) op = user->Find(who, req.op());
  if (op != nullptr) {
    *found = op;
    return Status::Ok();
  }
  std::vector<std::string> names;
  for (const OpDef* o : OpRegistry::Global().List())
    if (!o->test_only() || test_ops) names.push_back(o->name);
  if (req.op().empty())
    return InvalidArgument("ExecuteRequest.op is empty; ops are " + NameList(names));
  return NotFound("unknown op " + Quote(req.op()) + "; this server has " + NameList(names) +
                  " (ListKernels describes them)");
}

// The attrs, resolved against the op's schema (kerneld/call.h): before any
// tensor is decoded, so an attr error is reported first.
Status DecodeAttrs(const v1::ExecuteRequest& req, const OpDef& op, KernelContext* call) {
  AttrMap given;
  for (const auto& [name, v] : req.attrs()) {
    AttrValue a;
    // A plain reference: lambdas may not capture structured bindings (before
    // C++20 in clang, which the sanitizer build uses).
    const std::string& attr = name;
    KERNELD_RETURN_IF_ERROR(FromProto([&] { return op.name + ": attr " + Quote(attr); }, v, &a));
    given.emplace(name, std::move(a));
  }
  return PrepareAttrs(op, given, call);
}

// One input's bytes: inline (used in place when naturally aligned, else a
// realigned copy), a buffer reference (bounds-checked and pinned), or none.
Status DecodeInputData(const v1::Tensor& t, int64_t nbytes, WhatFn what, BufferRegistry* reg,
                       const Principal& who, DecodedRequest* d, TensorView* v) {
  switch (t.data_case()) {
    case v1::Tensor::kInlineData: {
      const std::string& bytes = t.inline_data();
      d->bytes_in_inline += bytes.size();
      if (static_cast<int64_t>(bytes.size()) != nbytes)
        return InvalidArgument(what() + ": inline_data has " + std::to_string(bytes.size()) +
                               " bytes; " + std::string(DTypeName(v->dtype)) + " " +
                               ShapeToString(v->shape) + " needs " + std::to_string(nbytes) +
                               " (elements x itemsize)");
      if (reinterpret_cast<uintptr_t>(bytes.data()) % ItemSize(v->dtype) != 0) {
        // Protobuf gives no alignment promise; kernels need natural alignment.
        char* p = d->scratch.Alloc(bytes.size());
        std::memcpy(p, bytes.data(), bytes.size());
        v->data = p;
      } else {
        v->data = const_cast<char*>(bytes.data());  // read-only use
      }
      return Status::Ok();
    }
    case v1::Tensor::kBuffer: {
      OutputPlace at;  // the same three fields, for an input
      KERNELD_RETURN_IF_ERROR(ResolveRef(reg, who, what, t.buffer(), nbytes, v->dtype, d, &at));
      v->data = at.data;
      v->byte_offset = at.byte_offset;
      v->device = at.device;
      d->bytes_in_buffer += static_cast<uint64_t>(nbytes);
      return Status::Ok();
    }
    case v1::Tensor::DATA_NOT_SET:
      break;
  }
  if (nbytes != 0)
    return InvalidArgument(what() + " has no data; set inline_data (" + std::to_string(nbytes) +
                           " bytes) or buffer");
  v->data = d->scratch.Alloc(0);
  return Status::Ok();
}

// The inputs, in schema order; a missing one keeps dtype kInvalid and is
// reported by the library's validation.
Status DecodeInputs(const v1::ExecuteRequest& req, BufferRegistry* reg, const Principal& who,
                    DecodedRequest* d) {
  const OpDef& op = *d->call.op;
  d->call.inputs.assign(op.inputs.size(), TensorView{});
  for (const auto& [name, t] : req.inputs()) {
    int idx = op.InputIndex(name);
    if (idx < 0) {
      std::vector<std::string> names;
      for (const auto& i : op.inputs) names.push_back(i.name);
      return InvalidArgument(op.name + ": unknown input " + Quote(name) + "; inputs are " +
                             NameList(names));
    }
    // Formatted only for an error: the success path builds no string.
    const std::string& input = name;  // not captured as a binding (see DecodeAttrs)
    auto what = [&] { return op.name + ": input '" + input + "'"; };
    int64_t nbytes = 0;
    KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
    TensorView& v = d->call.inputs[static_cast<size_t>(idx)];
    v.dtype = FromProto(t.dtype());
    v.shape.assign(t.shape().begin(), t.shape().end());
    v.device = Device::Cpu();
    KERNELD_RETURN_IF_ERROR(DecodeInputData(t, nbytes, what, reg, who, d, &v));
  }
  return Status::Ok();
}

// Outputs the client placed itself: names, headers against the inferred
// specs, and where they may go.
Status CheckPlacedOutputs(const v1::ExecuteRequest& req, const OpDef& op,
                          const std::vector<OutputSpec>& specs) {
  for (const auto& [name, t] : req.outputs()) {
    int idx = op.OutputIndex(name);
    if (idx < 0) {
      std::vector<std::string> names;
      for (const auto& o : op.outputs) names.push_back(o.name);
      return InvalidArgument(op.name + ": unknown output " + Quote(name) + "; outputs are " +
                             NameList(names));
    }
    const std::string& output = name;  // not captured as a binding (see DecodeAttrs)
    auto what = [&] { return op.name + ": output '" + output + "'"; };
    const OutputDef& od = op.outputs[static_cast<size_t>(idx)];
    // A buffer with no header (dtype unspecified, no shape) takes the dtype
    // and shape the op infers; PlaceOutputs bounds-checks the buffer for
    // them. The KServe front end places outputs so (kserve/infer_codec.h).
    const bool inferred = t.dtype() == v1::DTYPE_UNSPECIFIED && t.shape_size() == 0 &&
                          t.data_case() == v1::Tensor::kBuffer;
    if (!inferred) {
      int64_t nbytes = 0;
      KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
      TensorView declared;
      declared.dtype = FromProto(t.dtype());
      declared.shape.assign(t.shape().begin(), t.shape().end());
      KERNELD_RETURN_IF_ERROR(CheckOutput(op, idx, specs[static_cast<size_t>(idx)], declared));
    }
    if (t.data_case() == v1::Tensor::kBuffer && !od.in_place_of.empty())
      return InvalidArgument(what() + " is written in place of input '" + od.in_place_of +
                             "'; it cannot be placed elsewhere (leave it out of outputs)");
    if (t.data_case() == v1::Tensor::kInlineData)
      return InvalidArgument(what() +
                             ": outputs take no inline_data; leave data unset to receive "
                             "the result inline, or name a buffer to have it written there");
  }
  return Status::Ok();
}

// Sizes first, allocation after: the inline outputs must fit in one
// response (--max_message_mb) and the request's memory in the daemon's
// budget (--max_inflight_mb) before a single output byte is allocated.
// InferOutputs checked every output's size, so these products are exact.
Status ReserveOutputs(const v1::ExecuteRequest& req, const std::vector<OutputSpec>& specs,
                      const DecodeOptions& opt, DecodedRequest* d) {
  const OpDef& op = *d->call.op;
  int64_t inline_out = 0;
  size_t biggest = op.outputs.size();  // named in the error only
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const int64_t nbytes = CheckedBytes(specs[i].shape, specs[i].dtype).value_or(kMaxTensorBytes);
    if (InBuffer(req, op.outputs[i])) {
      d->bytes_out_buffer += static_cast<uint64_t>(nbytes);
      continue;
    }
    d->bytes_out_inline += static_cast<uint64_t>(nbytes);
    inline_out += nbytes;
    if (biggest == op.outputs.size() || nbytes * 2 > inline_out) biggest = i;
  }
  if (opt.max_inline_out_bytes > 0 && inline_out > opt.max_inline_out_bytes)
    return ResourceExhausted(
        op.name + ": the inline result would be " + HumanBytes(inline_out) + " (output '" +
        op.outputs[biggest].name + "' " + std::string(DTypeName(specs[biggest].dtype)) + " " +
        ShapeToString(specs[biggest].shape) + "); a response holds at most " +
        HumanBytes(opt.max_inline_out_bytes) +
        " (--max_message_mb). Place the output in a registered buffer, or split the request");
  if (opt.budget != nullptr) {
    const int64_t held = static_cast<int64_t>(d->bytes_in_inline) + inline_out;
    if (!opt.budget->TryReserve(held, &d->memory))
      return ResourceExhausted(op.name + ": kerneld is holding " + HumanBytes(opt.budget->used()) +
                               " for requests in flight and this one needs " + HumanBytes(held) +
                               "; the limit is " + HumanBytes(opt.budget->limit()) +
                               " (--max_inflight_mb). Retry with backoff");
  }
  return Status::Ok();
}

// The outputs' headers in the response and their memory, laid out by the
// library (kerneld/call.h, LayOutOutputs, which also enforces the aliasing
// rules). An output is computed straight into the response's bytes (no
// extra copy) or into the client's buffer. An in-place output is its
// input's memory: for an inline input, that input is first copied into the
// response, and the kernel reads and writes the copy (the request's bytes
// are never modified).
Status PlaceOutputs(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, BufferRegistry* reg,
                    const Principal& who, const std::vector<OutputSpec>& specs, DecodedRequest* d) {
  const OpDef& op = *d->call.op;
  absl::InlinedVector<OutputPlace, 4> placed(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const OutputDef& od = op.outputs[i];
    v1::Tensor& out = (*resp->mutable_outputs())[od.name];
    out.set_dtype(ToProto(specs[i].dtype));
    for (int64_t s : specs[i].shape) out.add_shape(s);
    if (!od.in_place_of.empty()) {
      const v1::Tensor& in_t = req.inputs().at(od.in_place_of);
      if (in_t.data_case() == v1::Tensor::kBuffer) {
        *out.mutable_buffer() = in_t.buffer();  // written in place, in the client's buffer
        continue;
      }
      TensorView& in = d->call.inputs[static_cast<size_t>(op.InputIndex(od.in_place_of))];
      std::string* bytes = out.mutable_inline_data();
      bytes->assign(static_cast<const char*>(in.raw()), static_cast<size_t>(in.nbytes()));
      in.data = bytes->data();
      in.byte_offset = 0;
      continue;
    }
    const int64_t nbytes = CheckedBytes(specs[i].shape, specs[i].dtype).value_or(0);
    auto at = req.outputs().find(od.name);
    if (at != req.outputs().end() && at->second.data_case() == v1::Tensor::kBuffer) {
      KERNELD_RETURN_IF_ERROR(ResolveRef(
          reg, who, [&] { return op.name + ": output '" + od.name + "'"; }, at->second.buffer(),
          nbytes, specs[i].dtype, d, &placed[i]));
      *out.mutable_buffer() = at->second.buffer();
    } else {
      std::string* bytes = out.mutable_inline_data();
      bytes->resize(static_cast<size_t>(nbytes));
      placed[i].data = bytes->data();
      placed[i].device = Device::Cpu();
    }
  }
  return LayOutOutputs(specs, /*alias=*/"",
                       std::span<const OutputPlace>(placed.data(), placed.size()), &d->call);
}

}  // namespace

Status DecodeRequest(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                     const DecodeOptions& opt, BufferRegistry* reg, const Principal& who,
                     DecodedRequest* d) {
  const OpDef* op = nullptr;
  KERNELD_RETURN_IF_ERROR(FindOp(req, opt.test_ops, who, &op));
  d->call.op = op;  // from here on, errors are counted under the op's name
  KERNELD_RETURN_IF_ERROR(DecodeAttrs(req, *op, &d->call));
  KERNELD_RETURN_IF_ERROR(DecodeInputs(req, reg, who, d));
  // Validation and output inference: the library's, on the call itself.
  std::vector<OutputSpec> specs;
  KERNELD_RETURN_IF_ERROR(PrepareInputs(d->call, &specs));
  KERNELD_RETURN_IF_ERROR(CheckPlacedOutputs(req, *op, specs));
  KERNELD_RETURN_IF_ERROR(ReserveOutputs(req, specs, opt, d));
  return PlaceOutputs(req, resp, reg, who, specs, d);
}

}  // namespace kerneld::server
