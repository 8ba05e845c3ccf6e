// KServe v2's names for tensor element types, against kerneld's DType: the
// request's "datatype" strings ("FP32") and ModelConfig's DataType enum
// (TYPE_FP32). kerneld has no unsigned type wider than a byte and no BYTES
// (strings), so UINT16/32/64 and BYTES name no DType.
#pragma once

#include <optional>
#include <string_view>

#include "inference/model_config.pb.h"
#include "kerneld/dtype.h"

namespace kerneld::server::kserve {

// "FP32" -> kFloat32; nullopt for a name kerneld has no type for.
std::optional<DType> DTypeOfDatatype(std::string_view datatype);
// kFloat32 -> "FP32".
std::string_view DatatypeOf(DType dt);
// kFloat32 -> inference::TYPE_FP32.
inference::DataType ConfigTypeOf(DType dt);
// The datatypes of every DType, for messages: "BOOL, UINT8, INT8, ...".
std::string_view KnownDatatypes();

// The dtype a model's metadata and config list for an input that takes any
// of `dts` (a request may send any of them): float32 where it is one, else
// int32, else the first.
DType DefaultDType(DTypeSet dts);

}  // namespace kerneld::server::kserve
