#include "kserve/datatype.h"

#include <array>
#include <utility>

namespace kerneld::server::kserve {

namespace {

struct Name {
  DType dt;
  std::string_view datatype;
  inference::DataType config;
};

constexpr std::array<Name, 10> kNames = {{
    {DType::kBool, "BOOL", inference::TYPE_BOOL},
    {DType::kUInt8, "UINT8", inference::TYPE_UINT8},
    {DType::kInt8, "INT8", inference::TYPE_INT8},
    {DType::kInt16, "INT16", inference::TYPE_INT16},
    {DType::kInt32, "INT32", inference::TYPE_INT32},
    {DType::kInt64, "INT64", inference::TYPE_INT64},
    {DType::kFloat16, "FP16", inference::TYPE_FP16},
    {DType::kBFloat16, "BF16", inference::TYPE_BF16},
    {DType::kFloat32, "FP32", inference::TYPE_FP32},
    {DType::kFloat64, "FP64", inference::TYPE_FP64},
}};

}  // namespace

std::optional<DType> DTypeOfDatatype(std::string_view datatype) {
  for (const Name& n : kNames)
    if (n.datatype == datatype) return n.dt;
  return std::nullopt;
}

std::string_view DatatypeOf(DType dt) {
  for (const Name& n : kNames)
    if (n.dt == dt) return n.datatype;
  return "INVALID";
}

inference::DataType ConfigTypeOf(DType dt) {
  for (const Name& n : kNames)
    if (n.dt == dt) return n.config;
  return inference::TYPE_INVALID;
}

std::string_view KnownDatatypes() {
  return "BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64";
}

DType DefaultDType(DTypeSet dts) {
  if (dts.Contains(DType::kFloat32)) return DType::kFloat32;
  if (dts.Contains(DType::kInt32)) return DType::kInt32;
  DType first = DType::kInvalid;
  dts.ForEach([&](DType d) {
    if (first == DType::kInvalid) first = d;
  });
  return first;
}

}  // namespace kerneld::server::kserve
