#include "kerneld/dtype.h"

namespace kerneld {

size_t ItemSize(DType dt) {
  switch (dt) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16: return 2;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool: return 1;
    case DType::kInvalid: return 0;
  }
  return 0;
}

std::string_view DTypeName(DType dt) {
  switch (dt) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kInvalid: return "invalid";
  }
  return "invalid";
}

std::optional<DType> ParseDType(std::string_view n) {
  for (int i = 1; i <= kMaxDType; ++i) {
    auto d = static_cast<DType>(i);
    if (n == DTypeName(d)) return d;
  }
  if (n == "fp16" || n == "f16" || n == "half") return DType::kFloat16;
  if (n == "bf16") return DType::kBFloat16;
  if (n == "fp32" || n == "f32" || n == "float") return DType::kFloat32;
  if (n == "fp64" || n == "f64" || n == "double") return DType::kFloat64;
  return std::nullopt;
}

bool IsFloating(DType dt) {
  return dt == DType::kFloat16 || dt == DType::kBFloat16 || dt == DType::kFloat32 ||
         dt == DType::kFloat64;
}

std::string DTypeSet::ToString() const {
  std::string s = "{";
  bool first = true;
  ForEach([&](DType d) {
    if (!first) s += ", ";
    s += DTypeName(d);
    first = false;
  });
  return s + "}";
}

}  // namespace kerneld
