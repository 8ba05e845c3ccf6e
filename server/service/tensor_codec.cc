#include "service/tensor_codec.h"

#include "kerneld/size.h"

namespace kerneld::server {

DType FromProto(int dt) {
  if (dt <= 0 || dt > kMaxDType) return DType::kInvalid;
  return static_cast<DType>(dt);
}

v1::DType ToProto(DType dt) { return static_cast<v1::DType>(static_cast<int>(dt)); }

Status CheckTensorHeader(WhatFn what, const v1::Tensor& t, int64_t* nbytes) {
  DType dt = FromProto(t.dtype());
  if (dt == DType::kInvalid)
    return InvalidArgument(what() + ": dtype " +
                           (t.dtype() == 0
                                ? std::string("is unspecified")
                                : std::to_string(t.dtype()) + " is not a kerneld.v1.DType") +
                           "; set Tensor.dtype (e.g. DTYPE_FLOAT32)");
  // Rank first: a 100,000-dim shape is refused before it is copied anywhere.
  if (t.shape_size() > kMaxRank)
    return InvalidArgument(what() + " has rank " + std::to_string(t.shape_size()) + "; at most " +
                           std::to_string(kMaxRank) + " dims are supported");
  // CheckTensorSize names the tensor only in its errors; "" on success.
  const Shape shape(t.shape().begin(), t.shape().end());
  Status st = CheckTensorSize("", dt, shape, nbytes);
  if (st.ok()) return st;
  return Status(st.code(), what() + st.message());
}

Status FromProto(WhatFn what, const v1::AttrValue& v, AttrValue* out) {
  switch (v.value_case()) {
    case v1::AttrValue::kF:
      *out = v.f();
      return Status::Ok();
    case v1::AttrValue::kI:
      *out = static_cast<int64_t>(v.i());
      return Status::Ok();
    case v1::AttrValue::kB:
      *out = v.b();
      return Status::Ok();
    case v1::AttrValue::kS:
      *out = v.s();
      return Status::Ok();
    case v1::AttrValue::VALUE_NOT_SET:
      break;
  }
  return InvalidArgument(what() + " has no value; set one of f, i, b, s");
}

void ToProto(const AttrValue& v, v1::AttrValue* out) {
  if (auto* d = std::get_if<double>(&v))
    out->set_f(*d);
  else if (auto* i = std::get_if<int64_t>(&v))
    out->set_i(*i);
  else if (auto* b = std::get_if<bool>(&v))
    out->set_b(*b);
  else
    out->set_s(std::get<std::string>(v));
}

}  // namespace kerneld::server
