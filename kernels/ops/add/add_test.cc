// add on the CPU against the float64 reference: dtypes x tail sizes, in
// place and not, random data, poisoned outputs; rounding and errors.
#include <gtest/gtest.h>

#include "row_op_inputs.h"

namespace kerneld::testing {
namespace {

class AddTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, bool>> {};

TEST_P(AddTest, MatchesFloat64Reference) {
  auto [dtype, n, in_place] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(n * 31 + static_cast<int>(dtype)));
  HostTensors in = {{"a", Random(dtype, {n}, rng, -100, 100)},
                    {"b", Random(dtype, {n}, rng, -100, 100)}};
  OpRun r = RunOnCpu("add", in, {}, in_place ? "y" : "");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference("add", in, {}, r.outputs), "");
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, AddTest,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{127}, int64_t{128}, int64_t{4095},
                                         int64_t{4097}, int64_t{1} << 20),
                       ::testing::Bool()));

TEST(Add, MultiDimensionalAndMisaligned) {
  std::mt19937_64 rng(31);
  for (DType dt : FloatTypes()) {
    HostTensors in = {{"a", Random(dt, {3, 5, 7}, rng)},
                      {"b", Random(dt, {3, 5, 7}, rng)}};
    OpRun r = RunOnCpu("add", in, {}, "", ItemSize(dt));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{3, 5, 7}));
    EXPECT_EQ(CheckAgainstReference("add", in, {}, r.outputs), "") << DTypeName(dt);
  }
}

TEST(Add, RoundsOnceToNearestEven) {
  // In bfloat16, 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the float32
  // sum, rounded once, goes to the even mantissa (1); (1 + 2^-7) + 2^-8 goes
  // up to 1 + 2^-6.
  HostTensor a, b;
  a.dtype = b.dtype = DType::kBFloat16;
  a.shape = b.shape = {2};
  a.values = {1.0, 1.0 + 1.0 / 128};
  b.values = {1.0 / 256, 1.0 / 256};
  OpRun r = RunOnCpu("add", {{"a", a}, {"b", b}}, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["y"].values[0], 1.0);
  EXPECT_EQ(r.outputs["y"].values[1], 1.0 + 4.0 / 256);
  // float16 overflow: 60000 + 60000 is Inf after the float32 sum.
  a.dtype = b.dtype = DType::kFloat16;
  a.values = {60000, -60000};
  b.values = {60000, -60000};
  r = RunOnCpu("add", {{"a", a}, {"b", b}}, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["y"].values[0], INFINITY);
  EXPECT_EQ(r.outputs["y"].values[1], -INFINITY);
}

TEST(Add, ErrorMessages) {
  std::mt19937_64 rng(32);
  HostTensors in = {{"a", Random(DType::kFloat32, {3, 4}, rng)},
                    {"b", Random(DType::kFloat32, {3, 5}, rng)}};
  EXPECT_EQ(RunOnCpu("add", in, {}).status.message(),
            "add: 'b' has shape [3, 5], expected [3, 4] (the shape of 'a')");
  in["b"] = Random(DType::kFloat16, {3, 4}, rng);
  EXPECT_EQ(RunOnCpu("add", in, {}).status.message(),
            "add: 'b' dtype float16 must equal 'a' dtype float32");
  in.erase("b");
  EXPECT_EQ(RunOnCpu("add", in, {}).status.message(), "add: missing input 'b'");
}

}  // namespace
}  // namespace kerneld::testing
