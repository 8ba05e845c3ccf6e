// Conversions between the wire (kerneld.v1 messages) and kernel-library
// types, with the checks a hostile request needs: dtype in range, no
// negative dims, no element or byte count that overflows, exact inline size.
#pragma once

#include <string>

#include "absl/functional/function_ref.h"
#include "kerneld/op.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::server {

// DType from the wire; kInvalid for UNSPECIFIED or out-of-range values.
DType FromProto(int dt);
v1::DType ToProto(DType dt);

// Names what a message is about ("scale: input 'x'"), called only when there
// is an error to report: the success path formats no string.
using WhatFn = absl::FunctionRef<std::string()>;

// Checks dtype and shape of a wire tensor with CheckTensorSize (kerneld/size.h):
// rank, negative dims, overflow, kMaxTensorBytes. On success *nbytes is
// numel * itemsize.
Status CheckTensorHeader(WhatFn what, const v1::Tensor& t, int64_t* nbytes);

Status FromProto(WhatFn what, const v1::AttrValue& v, AttrValue* out);
void ToProto(const AttrValue& v, v1::AttrValue* out);

}  // namespace kerneld::server
