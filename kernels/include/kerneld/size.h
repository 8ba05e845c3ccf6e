// Checked size arithmetic: the one place where element counts, byte counts,
// offsets and ranges that come from clients are computed.
//
// Every tensor that passes CheckTensorSize has numel and nbytes below
// kMaxTensorBytes (2^48, 256 TiB), so sums of a few such sizes, or a size
// plus a checked offset, cannot overflow int64 further down the call path
// (TensorView::nbytes, output layout, staging, Overlaps). Decode, schema
// validation and output inference all go through here; no op writes its own
// overflow checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kerneld/dtype.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld {

// Largest byte size of one tensor (and of one buffer range): far beyond any
// device's memory, far below int64's range.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;
// Largest rank a tensor may have (PyTorch's limit too).
inline constexpr int64_t kMaxRank = 64;

// a * b and a + b on non-negative int64s; nullopt on overflow.
std::optional<int64_t> CheckedMul(int64_t a, int64_t b);
std::optional<int64_t> CheckedAdd(int64_t a, int64_t b);

// Element count and byte count of a shape; nullopt when a dim is negative or
// a product overflows int64. (CheckedNumel is declared in tensor.h.)
std::optional<int64_t> CheckedBytes(const Shape& shape, DType dtype);

// End of the byte range [offset, offset + nbytes) when it lies within
// [0, limit]; nullopt otherwise (overflow included).
std::optional<uint64_t> CheckedRangeEnd(uint64_t offset, uint64_t nbytes, uint64_t limit);

// Validates a tensor's shape from a client: rank <= kMaxRank, no negative
// dim, numel * itemsize without overflow and <= kMaxTensorBytes. `what`
// names the tensor ("scale: input 'x'"). Sets *nbytes when given.
// Zero-size dims are valid (nbytes 0).
Status CheckTensorSize(std::string_view what, DType dtype, const Shape& shape,
                       int64_t* nbytes = nullptr);

// "1.5 GiB", "256 MiB", "12 bytes": sizes in messages a person reads.
std::string HumanBytes(int64_t n);

}  // namespace kerneld
