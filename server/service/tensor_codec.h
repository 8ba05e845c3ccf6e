// Conversions between the wire (kerneld.v1 messages) and kernel-library
// types, with the checks a hostile request needs: dtype in range, no
// negative dims, no element or byte count that overflows, exact inline size.
#pragma once

#include <string>

#include "kerneld/v1/kerneld.pb.h"
#include "kerneld/op.h"

namespace kerneld::server {

// DType from the wire; kInvalid for UNSPECIFIED or out-of-range values.
DType FromProto(int dt);
v1::DType ToProto(DType dt);

// Checks dtype and shape of a wire tensor with CheckTensorSize (kerneld/size.h):
// rank, negative dims, overflow, kMaxTensorBytes; `what` is "scale: input 'x'".
// On success *nbytes is numel * itemsize.
Status CheckTensorHeader(const std::string& what, const v1::Tensor& t, int64_t* nbytes);

Status FromProto(const std::string& what, const v1::AttrValue& v, AttrValue* out);
void ToProto(const AttrValue& v, v1::AttrValue* out);

}  // namespace kerneld::server
