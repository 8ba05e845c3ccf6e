#include "scheduler/shape_bucket.h"

#include <bit>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace kerneld::server {

namespace {
constexpr int kMaxBucketDTypes = 8;
}  // namespace

uint8_t BucketCode(int64_t v) {
  if (v <= 0) return 0;
  // ceil(log2(v)) for v >= 1: the bit width of v - 1.
  return static_cast<uint8_t>(1 + std::bit_width(static_cast<uint64_t>(v - 1)));
}

int64_t BucketBound(uint8_t code) {
  if (code == 0) return 0;
  if (code > 63) return INT64_MAX;
  return int64_t{1} << (code - 1);
}

ShapeBucket BucketOf(const OpDef& op, const KernelContext& ctx) {
  ShapeBucket b;
  const size_t n = std::min<size_t>(ctx.inputs.size(), kMaxBucketDTypes);
  for (size_t i = 0; i < n; ++i) b.dtypes |= static_cast<uint64_t>(ctx.inputs[i].dtype) << (8 * i);
  if (!op.tune_dims.names.empty()) {
    int64_t dims[kMaxTuneDims] = {};
    op.tune_dims.of(ctx, dims);
    b.ndims = static_cast<uint8_t>(op.tune_dims.names.size());
    for (int i = 0; i < b.ndims; ++i) b.code[static_cast<size_t>(i)] = BucketCode(dims[i]);
    return b;
  }
  int64_t numel = 0;
  for (const TensorView& v : ctx.inputs) {
    int64_t e = 1;
    for (int64_t d : v.shape) e *= d;  // validated views: no overflow (kerneld/size.h)
    numel += e;
  }
  b.ndims = 1;
  b.code[0] = BucketCode(numel);
  return b;
}

std::string BucketDims(const OpDef& op, const ShapeBucket& b) {
  std::string out;
  for (int i = 0; i < b.ndims; ++i) {
    if (i) out += ',';
    out += op.tune_dims.names.empty() ? std::string("numel")
                                      : op.tune_dims.names[static_cast<size_t>(i)];
    out += "<=" + std::to_string(BucketBound(b.code[static_cast<size_t>(i)]));
  }
  return out;
}

std::string BucketDTypes(const ShapeBucket& b, int ninputs) {
  std::string out;
  for (int i = 0; i < std::min(ninputs, kMaxBucketDTypes); ++i) {
    if (i) out += ',';
    out += DTypeName(static_cast<DType>((b.dtypes >> (8 * i)) & 0xff));
  }
  return out;
}

bool ParseBucket(const OpDef& op, const std::string& dims, const std::string& dtypes,
                 ShapeBucket* out) {
  ShapeBucket b;
  const std::vector<std::string> want =
      op.tune_dims.names.empty() ? std::vector<std::string>{"numel"} : op.tune_dims.names;
  const std::vector<std::string> parts = absl::StrSplit(dims, ',');
  if (parts.size() != want.size()) return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::vector<std::string> kv = absl::StrSplit(parts[i], "<=");
    int64_t bound = 0;
    if (kv.size() != 2 || kv[0] != want[i] || !absl::SimpleAtoi(kv[1], &bound) || bound < 0)
      return false;
    b.code[i] = BucketCode(bound);
    if (BucketBound(b.code[i]) != bound) return false;  // not a power of two
  }
  b.ndims = static_cast<uint8_t>(want.size());
  if (!dtypes.empty()) {
    const std::vector<std::string> names = absl::StrSplit(dtypes, ',');
    if (names.size() > static_cast<size_t>(kMaxBucketDTypes)) return false;
    for (size_t i = 0; i < names.size(); ++i) {
      auto dt = ParseDType(names[i]);
      if (!dt) return false;
      b.dtypes |= static_cast<uint64_t>(*dt) << (8 * i);
    }
  }
  *out = b;
  return true;
}

}  // namespace kerneld::server
