// Element types. The enumerator values equal kerneld.v1.DType's so the wire
// conversion is a checked cast, not a table that can drift.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kerneld {

enum class DType : uint8_t {
  kInvalid = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat32 = 3,
  kFloat64 = 4,
  kInt8 = 5,
  kInt16 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kUInt8 = 9,
  kBool = 10,
};
inline constexpr int kMaxDType = 10;

// Bytes per element; 0 for kInvalid.
size_t ItemSize(DType dt);
// "float16", "bfloat16", ... ; "invalid" for anything unknown.
std::string_view DTypeName(DType dt);
// Accepts the names above and the short forms fp16/f16/half, bf16, fp32/f32, fp64.
std::optional<DType> ParseDType(std::string_view name);
bool IsFloating(DType dt);

// A set of dtypes, for schemas ("float16, bfloat16, float32").
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> dts) {
    for (DType d : dts) bits_ |= Bit(d);
  }
  static constexpr DTypeSet All() {
    DTypeSet s;
    s.bits_ = ((1u << (kMaxDType + 1)) - 1) & ~1u;
    return s;
  }
  constexpr bool Contains(DType d) const { return (bits_ & Bit(d)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr DTypeSet Intersect(DTypeSet o) const {
    DTypeSet s;
    s.bits_ = bits_ & o.bits_;
    return s;
  }
  constexpr bool operator==(const DTypeSet&) const = default;
  // "{float16, bfloat16, float32}"
  std::string ToString() const;
  template <typename F>
  void ForEach(F&& f) const {
    for (int i = 1; i <= kMaxDType; ++i)
      if (bits_ & (1u << i)) f(static_cast<DType>(i));
  }

 private:
  static constexpr uint32_t Bit(DType d) {
    return 1u << static_cast<uint32_t>(d);
  }
  uint32_t bits_ = 0;
};

inline constexpr DTypeSet kFloatingTypes{DType::kFloat16, DType::kBFloat16,
                                         DType::kFloat32};
inline constexpr DTypeSet kIndexTypes{DType::kInt32, DType::kInt64};

}  // namespace kerneld
