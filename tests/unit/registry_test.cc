// The registry and schema validation: registration rules, shape patterns,
// and the exact messages a client sees.
#include <gtest/gtest.h>

#include "kerneld/check.h"
#include "kerneld/op.h"
#include "kerneld/size.h"

namespace kerneld {
namespace {

TensorView View(DType dt, Shape s) {
  TensorView v;
  v.dtype = dt;
  v.shape = std::move(s);
  return v;
}

OpDef NormLike() {
  OpDef op("norm");
  op.Input("x", kFloatingTypes, "[..., hidden_size]")
      .Input("weight", kFloatingTypes, "[hidden_size]")
      .Output("y", SameAs("x"))
      .SameDType("x", "weight")
      .AttrWithDefault("eps", AttrType::kFloat, 1e-6)
      .Impl("cpu", [](KernelContext&) { return Status::Ok(); });
  return op;
}

TEST(Registry, BuiltinsAreRegistered) {
  const OpDef* scale = OpRegistry::Global().Find("scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_NE(scale->FindImpl("cpu"), nullptr);
  EXPECT_EQ(OpRegistry::Global().Find("nope"), nullptr);
  auto backends = OpRegistry::Global().Backends();
  EXPECT_NE(std::find(backends.begin(), backends.end(), "cpu"), backends.end());
}

TEST(Registry, RejectsDuplicates) {
  OpRegistry r;
  EXPECT_TRUE(r.Register(NormLike()).ok());
  Status st = r.Register(NormLike());
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  OpDef two("two");
  two.Impl("cpu", [](KernelContext&) { return Status::Ok(); }).Impl("cpu", [](KernelContext&) {
    return Status::Ok();
  });
  EXPECT_EQ(r.Register(std::move(two)).code(), StatusCode::kAlreadyExists);
}

TEST(Validation, DTypeMessageNamesAllowedTypes) {
  OpDef op = NormLike();
  ShapeBindings b;
  Status st = ValidateInputs(op, {View(DType::kInt32, {4, 8}), View(DType::kFloat32, {8})}, {}, &b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "norm: 'x' dtype int32 not in {float16, bfloat16, float32}");
}

TEST(Validation, SymbolicDimMismatchNamesTheDim) {
  OpDef op = NormLike();
  ShapeBindings b;
  Status st =
      ValidateInputs(op, {View(DType::kFloat32, {2, 4096}), View(DType::kFloat32, {4095})}, {}, &b);
  EXPECT_EQ(st.message(), "norm: 'weight' dim 0 ('hidden_size'): expected 4096, got 4095");
}

// A view off its element size's alignment is refused before any kernel
// loads from it (UBSan: misaligned loads in the CPU kernels).
TEST(Validation, MisalignedViewIsRefused) {
  OpDef op = NormLike();
  ShapeBindings b;
  alignas(16) static float storage[64];
  TensorView x = View(DType::kFloat32, {2, 8}), w = View(DType::kFloat32, {8});
  x.data = reinterpret_cast<char*>(storage) + 2;
  w.data = storage;
  Status st = ValidateInputs(op, {x, w}, {}, &b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not a multiple of its float32 size (4 bytes)"), std::string::npos)
      << st.message();
  x.data = reinterpret_cast<char*>(storage) + 4;  // aligned to the element, not to 16: fine
  EXPECT_TRUE(ValidateInputs(op, {x, w}, {}, &b).ok());
}

// Sizes are checked once for every op: rank, overflow, the 2^48-byte cap.
TEST(Validation, CheckedSizes) {
  OpDef op = NormLike();
  ShapeBindings b;
  Status st = ValidateInputs(
      op, {View(DType::kFloat32, {int64_t{1} << 40, 4096}), View(DType::kFloat32, {4096})}, {}, &b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("larger than any tensor"), std::string::npos) << st.message();
  EXPECT_EQ(CheckedNumel({int64_t{1} << 32, int64_t{1} << 32}), std::nullopt);
  EXPECT_EQ(CheckedNumel({3, 0, int64_t{1} << 62}), 0);
  EXPECT_EQ(CheckedBytes({int64_t{1} << 62}, DType::kFloat32), std::nullopt);
  EXPECT_EQ(CheckedRangeEnd(~uint64_t{0}, 2, ~uint64_t{0}), std::nullopt);
  EXPECT_EQ(CheckedRangeEnd(8, 8, 16), 16u);
  EXPECT_EQ(HumanBytes(int64_t{4} << 40), "4 TiB");
  EXPECT_EQ(Quote(std::string(200, 'a')).size(), 1 + 128 + std::string("…").size() + 1);
  EXPECT_EQ(Quote("a\nb\x01"), "'a\\nb\\x01'");
  EXPECT_LE(Status(StatusCode::kInternal, std::string(100000, 'x')).message().size(),
            kMaxStatusMessage + 32);
}

TEST(Validation, RankAndMissingAndSameDType) {
  OpDef op = NormLike();
  ShapeBindings b;
  Status st = ValidateInputs(op, {View(DType::kFloat32, {}), View(DType::kFloat32, {8})}, {}, &b);
  EXPECT_NE(st.message().find("rank >= 1"), std::string::npos) << st.message();
  b = {};
  st = ValidateInputs(op, {View(DType::kFloat32, {8}), TensorView{}}, {}, &b);
  EXPECT_EQ(st.message(), "norm: missing input 'weight'");
  b = {};
  st = ValidateInputs(op, {View(DType::kFloat32, {8}), View(DType::kFloat16, {8})}, {}, &b);
  EXPECT_EQ(st.message(), "norm: 'weight' dtype float16 must equal 'x' dtype float32");
}

TEST(Validation, PatternsWithCoefficientsAndEllipsis) {
  ShapeBindings b;
  ShapePattern p = ShapePattern::Parse("[..., 2*d]");
  EXPECT_TRUE(MatchShape("act", "'x'", p, {3, 5, 8}, &b).ok());
  EXPECT_EQ(b.symbols["d"], 4);
  EXPECT_EQ(*b.ellipsis, (Shape{3, 5}));
  Shape out;
  EXPECT_TRUE(EvalShape("act", ShapePattern::Parse("[..., d]"), b, &out).ok());
  EXPECT_EQ(out, (Shape{3, 5, 4}));
  ShapeBindings b2;
  Status st = MatchShape("act", "'x'", p, {3, 7}, &b2);
  EXPECT_EQ(st.message(), "act: 'x' dim 1 ('2*d'): expected a multiple of 2, got 7");
  // A second tensor must agree on the ellipsis.
  ShapeBindings b3;
  EXPECT_TRUE(MatchShape("n", "'x'", ShapePattern::Parse("[..., h]"), {4, 5, 6}, &b3).ok());
  st = MatchShape("n", "'r'", ShapePattern::Parse("[..., h]"), {4, 4, 6}, &b3);
  EXPECT_NE(st.message().find("leading dims [4, 4] must equal the other inputs' [4, 5]"),
            std::string::npos)
      << st.message();
}

TEST(Attrs, ResolveChecksTypesAndDefaults) {
  OpDef op = NormLike();
  op.Attr("factor", AttrType::kFloat, "required");
  AttrMap out;
  Status st = ResolveAttrs(op, {}, &out);
  EXPECT_EQ(st.message(), "norm: missing required attr 'factor' (float)");
  st = ResolveAttrs(op, {{"factor", std::string("two")}}, &out);
  EXPECT_EQ(st.message(), "norm: attr 'factor' must be float, got string \"two\"");
  st = ResolveAttrs(op, {{"factor", int64_t{2}}, {"bogus", true}}, &out);
  EXPECT_EQ(st.message(), "norm: unknown attr 'bogus'; attrs are {eps, factor}");
  st = ResolveAttrs(op, {{"factor", int64_t{2}}}, &out);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(std::get<double>(out["factor"]), 2.0);  // int widened to float
  EXPECT_EQ(std::get<double>(out["eps"]), 1e-6);    // default filled in
}

TEST(Requirements, DeviceAndRequestRejections) {
  Requirements r = Requirements::Cuda(89);
  DeviceInfo a100;
  a100.device = Device::Cuda(0);
  a100.compute_capability = 80;
  EXPECT_EQ(*r.RejectDevice(a100), "needs compute capability >= 8.9; cuda:0 is 8.0");
  DeviceInfo cpu;
  EXPECT_EQ(*r.RejectDevice(cpu), "needs a cuda device; cpu is cpu");
  a100.compute_capability = 90;
  EXPECT_FALSE(r.RejectDevice(a100).has_value());
  EXPECT_EQ(r.Describe(), "cuda, compute capability >= 8.9");
}

// dtypes and alignment refuse a request (the attention CUDA impls set
// them); a host view is judged as staged on a GPU, 256-byte aligned.
TEST(Requirements, RequestRejections) {
  OpDef op = NormLike();
  Requirements r = Requirements::Cuda(80);
  r.dtypes = {DType::kFloat16, DType::kBFloat16};
  r.alignment = 16;
  EXPECT_EQ(r.Describe(),
            "cuda, compute capability >= 8.0, dtypes {float16, bfloat16}, "
            "16-byte aligned");
  alignas(256) static char mem[1024];
  KernelContext ctx;
  ctx.op = &op;
  ctx.inputs = {View(DType::kFloat16, {2, 8}), View(DType::kFloat16, {8})};
  ctx.inputs[0].data = mem;
  ctx.inputs[1].data = mem + 256;
  ctx.inputs[0].device = ctx.inputs[1].device = Device::Cuda(0);
  EXPECT_EQ(r.RejectRequest(ctx), std::nullopt);
  ctx.inputs[1].data = mem + 258;
  EXPECT_EQ(r.RejectRequest(ctx).value_or(""), "input 'weight' is 2-byte aligned; needs 16");
  DeviceInfo gpu;
  gpu.device = Device::Cuda(0);
  gpu.compute_capability = 90;
  ctx.inputs[1].device = Device::Cpu();  // staged on the GPU: fresh, aligned memory
  EXPECT_EQ(r.RejectRequest(ctx, &gpu), std::nullopt);
  EXPECT_EQ(r.RejectRequest(ctx).value_or(""), "input 'weight' is 2-byte aligned; needs 16");
  ctx.inputs[1].data = mem + 256;
  ctx.outputs = {View(DType::kFloat32, {2, 8})};  // an output's dtype is not checked
  ctx.outputs[0].data = mem + 512 + 4;
  ctx.outputs[0].device = Device::Cuda(0);
  EXPECT_EQ(r.RejectRequest(ctx).value_or(""), "output 'y' is 4-byte aligned; needs 16");
  ctx.outputs[0].data = mem + 512;
  EXPECT_EQ(r.RejectRequest(ctx), std::nullopt);
  ctx.inputs[0].dtype = DType::kFloat32;
  EXPECT_EQ(r.RejectRequest(ctx).value_or(""),
            "input 'x' dtype float32 not in {float16, bfloat16}");
}

// The scheduler's success path asks AcceptsDevice; it must agree with
// RejectDevice (whose reason the refusal prints) on every device.
TEST(Requirements, AcceptsDeviceAgreesWithRejectDevice) {
  std::vector<Requirements> reqs = {Requirements(), Requirements::Cuda(0), Requirements::Cuda(80),
                                    Requirements::Cuda(90)};
  Requirements capped = Requirements::Cuda(70);
  capped.max_compute_capability = 89;
  reqs.push_back(capped);
  int accepted = 0, refused = 0;
  for (const Requirements& r : reqs) {
    for (const Device dev : {Device::Cpu(), Device::Cuda(0), Device::Cuda(1)}) {
      for (const int cc : {0, 70, 80, 89, 90, 100}) {
        for (const bool healthy : {true, false}) {
          DeviceInfo d;
          d.device = dev;
          d.compute_capability = cc;
          d.healthy = healthy;
          const bool accepts = r.AcceptsDevice(d);
          EXPECT_EQ(accepts, !r.RejectDevice(d).has_value())
              << r.Describe() << " on " << dev.ToString() << " cc " << cc << " healthy " << healthy;
          (accepts ? accepted : refused)++;
        }
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

TEST(Numel, OverflowAndNegative) {
  EXPECT_EQ(*CheckedNumel({2, 3, 4}), 24);
  EXPECT_EQ(*CheckedNumel({}), 1);
  EXPECT_FALSE(CheckedNumel({-1, 4}).has_value());
  EXPECT_FALSE(CheckedNumel({int64_t{1} << 40, int64_t{1} << 40}).has_value());
}

}  // namespace
}  // namespace kerneld
