// The attention ops on CUDA against the float64 references (o within the
// dtype's tolerance; lse within 1e-4, the kernels' fast exp/log) and the
// CPU: decode over GQA groups 1, 4, 8 and MQA, head_dim 64 / 128 / 256,
// page tails and empty caches, long caches that take the split-KV path;
// prefill paged and ragged, causal or not, through both prefill kernels
// (the tiled tensor-core one, prefill_mma.cuh, and the row kernel; plan.h
// says which takes a case, and each case asserts it); the tensor-core
// decode (decode_mma.cuh) around its tiles, packings and chunks: tails around the
// tile sizes, every head packing, queries past the keys, page sizes 1 and
// 3, soft cap, views off 256-byte boundaries; merge_state; the append then
// a decode of what it wrote; and every hostile index refused with the
// CPU's exact message, on both prefill kernels. Run it under
// compute-sanitizer to see that a hostile index reads nothing out of
// bounds.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <numeric>

#include "common/attention/plan.h"
#include "gpu_util.h"
#include "ops/batch_decode_paged/attention_cases.h"

namespace kerneld::testing {
namespace {

const std::vector<std::string> kQo = {"qo_indptr"};

void ExpectClose(const std::string& op, const HostTensors& in, const AttrMap& attrs,
                 const HostTensors& got) {
  HostTensors ref;
  std::string err;
  ASSERT_TRUE(Reference(op, in, attrs, &ref, &err)) << err;
  for (const auto& [name, want] : ref) {
    ASSERT_TRUE(got.count(name)) << name;
    double rtol, atol;
    Tolerance(want.dtype, &rtol, &atol);
    if (name == "lse" || name == "s") rtol = atol = 1e-4;
    const Comparison c = Compare(got.at(name).values, want.values, rtol, atol);
    EXPECT_EQ(c.mismatches, 0) << op << " " << name << ": first bad " << c.first_bad
                               << ", max abs err " << c.max_abs_err;
  }
}

// The paged prefill and the ragged one over the same keys, each against
// its reference (views `misalign` bytes off 256-byte boundaries).
void ExpectPrefill(const AttnCase& c, const AttrMap& attrs, size_t misalign = 0) {
  SCOPED_TRACE(c.Name() + (AttrOr(attrs, "causal", false) ? " causal" : ""));
  HostTensors ragged;
  const HostTensors paged = MakePaged(c, &ragged);
  OpRun p = RunOnCuda("batch_prefill_paged", paged, attrs, "cuda", "", misalign);
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  ExpectClose("batch_prefill_paged", paged, attrs, p.outputs);
  OpRun r = RunOnCuda("batch_prefill_ragged", ragged, attrs, "cuda", "", misalign);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectClose("batch_prefill_ragged", ragged, attrs, r.outputs);
}

void ExpectDecode(const AttnCase& c, const AttrMap& attrs = {}) {
  SCOPED_TRACE(c.Name());
  const HostTensors in = Without(MakePaged(c), kQo);
  OpRun r = RunOnCuda("batch_decode_paged", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectClose("batch_decode_paged", in, attrs, r.outputs);
}

const std::vector<DType>& Half16() {
  static const std::vector<DType> v = {DType::kFloat16, DType::kBFloat16};
  return v;
}

TEST(AttentionGpu, DecodeGroupsHeadDimsTails) {
  AttnCase base;
  base.kv_lens = DecodeTailLens();
  for (const AttnCase& c :
       HeadSweep(base, Half16(), {{8, 8}, {16, 4}, {32, 4}, {8, 1}, {32, 1}},
                 [](const AttnCase& c) { return static_cast<uint64_t>(c.hq * 7 + c.hkv + c.d); }))
    ExpectDecode(c);
}

TEST(AttentionGpu, DecodeLongCachesSplitKvAndAttrs) {
  for (DType dt : Half16()) {
    AttnCase c = Shaped(dt, 32, 8, 128, {8191});  // one request: many chunks
    ExpectDecode(c);
    c.kv_lens = {2049, 1, 4096, 300};
    ExpectDecode(c);
    ExpectDecode(c, {{"logits_soft_cap", 30.0}, {"sm_scale", 0.05}});
    c.page_size = 1;
    c.kv_lens = {700, 3};
    ExpectDecode(c);
  }
}

// The tensor-core decode (decode_mma.cuh) takes head_dim 64 and 128: keys
// around its 64-key tiles and the 16 keys of each warp, page sizes that
// split tiles (1, 3, 16, 64), every packing of a group into its 16 M rows
// (3 of a group of 3, 12 of 12, 16 of 32 in two blocks, 1), and caches
// long enough that each request's keys split into chunks (a batch of one
// and of two on a device of any size) with chunks left empty.
TEST(AttentionGpu, DecodeTensorCoreTilesPacksAndChunks) {
  for (DType dt : Half16())
    for (int64_t d : {64, 128})
      for (auto [hq, hkv] :
           std::vector<std::pair<int64_t, int64_t>>{{6, 2}, {24, 2}, {32, 1}, {4, 4}})
        for (int64_t page : {1, 3, 16, 64}) {
          AttnCase c = Shaped(dt, hq, hkv, d, {63, 64, 65, 127, 0, 129, 16, 1, 200});
          c.page_size = page;
          c.seed = static_cast<uint64_t>(hq * 131 + d + page);
          ASSERT_TRUE(cuda::attention::DecodeMmaTakes(static_cast<int>(d), 1 << 20));
          ExpectDecode(c);
        }
  for (DType dt : Half16()) {
    AttnCase c = Shaped(dt, 32, 8, 128, {20000});
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    ASSERT_GT(cuda::attention::DecodeMmaChunks(1, 8, 20000, sms), 1);
    ExpectDecode(c, {{"logits_soft_cap", 20.0}});
    c.kv_lens = {5000, 3};  // the short request's later chunks hold no key
    ExpectDecode(c);
  }
}

TEST(AttentionGpu, PrefillPagedAndRagged) {
  AttnCase base;
  base.kv_lens = {1, 15, 17, 0, 9, 300};
  base.qo_lens = {3, 15, 4, 2, 0, 260};
  for (const AttnCase& c : HeadSweep(base, Half16(), {{16, 4}}))
    for (bool causal : {false, true}) ExpectPrefill(c, {{"causal", causal}});
}

// Whether c's prefills take the tiled kernel (plan.h; its keys are far
// fewer than 2^31).
bool Tiled(const AttnCase& c) {
  const int64_t rows = std::accumulate(c.qo_lens.begin(), c.qo_lens.end(), int64_t{0});
  return cuda::attention::TiledPrefillTakes(rows, static_cast<int64_t>(c.qo_lens.size()),
                                            static_cast<int>(c.hq), static_cast<int>(c.hq / c.hkv),
                                            static_cast<int>(c.d), 0);
}

// Query rows around a tiled block's 64, 32, 16 and 8 rows (one query head
// packed, 2, 4, 8), over caches shorter, equal and longer, with key
// tiles' tails; every head packing (groups 1, 4, 8, MQA and 3).
TEST(AttentionGpu, PrefillTiledTailsPackingsAndMasks) {
  AttnCase base;
  base.kv_lens = {1, 15, 17, 0, 64, 200, 63, 130, 9};
  base.qo_lens = {1, 15, 16, 17, 63, 64, 65, 130, 33};
  for (const AttnCase& c : HeadSweep(base, Half16(), {{8, 8}, {16, 4}, {16, 2}, {8, 1}, {6, 2}})) {
    if (c.d == 256) continue;  // the row kernel's (PrefillPagedAndRagged)
    ASSERT_TRUE(Tiled(c)) << c.Name();
    for (bool causal : {false, true}) ExpectPrefill(c, {{"causal", causal}});
  }
}

// Many key tiles: a prefill extending a cache, one from scratch, queries
// past the keys (causal rows that see nothing); pages of 1 and 3 keys;
// soft cap and a scale; views 16 bytes off 256-byte boundaries.
TEST(AttentionGpu, PrefillTiledLongCachesPagesAndAttrs) {
  for (DType dt : Half16())
    for (int64_t d : {64, 128}) {
      AttnCase c = Shaped(dt, 8, 2, d, {400, 160, 40}, {256, 160, 129});
      ASSERT_TRUE(Tiled(c));
      ExpectPrefill(c, {{"causal", true}});
      ExpectPrefill(c, {{"causal", false}, {"logits_soft_cap", 30.0}, {"sm_scale", 0.05}});
      c.page_size = 1;
      ExpectPrefill(c, {{"causal", true}}, /*misalign=*/16);
      c.page_size = 3;
      c.kv_lens = {0, 300, 77};
      ExpectPrefill(c, {{"causal", true}, {"logits_soft_cap", 5.0}});
    }
}

// Short requests (decode-like) and head_dim 256 stay on the row kernel.
TEST(AttentionGpu, PrefillRowKernelForShortRequests) {
  for (DType dt : Half16()) {
    const AttnCase c = Shaped(dt, 16, 4, 128, {40, 17, 5, 70}, {2, 3, 1, 15});
    ASSERT_FALSE(Tiled(c));
    ExpectPrefill(c, {{"causal", true}});
  }
}

TEST(AttentionGpu, DecodeMatchesPrefillWithOneRow) {
  auto [d, p] =
      DecodeAndOneRowPrefill(Shaped(DType::kBFloat16, 32, 8, 128, {5, 16, 0, 1000}, {1, 1, 1, 1}),
                             [](const std::string& op, const HostTensors& in,
                                const AttrMap& attrs) { return RunOnCuda(op, in, attrs); });
  ASSERT_TRUE(p.status.ok() && d.status.ok()) << p.status.ToString() << d.status.ToString();
  EXPECT_EQ(Compare(p.outputs["o"].values, d.outputs["o"].values, 1e-2, 1e-2).mismatches, 0);
  EXPECT_EQ(Compare(p.outputs["lse"].values, d.outputs["lse"].values, 1e-4, 1e-4).mismatches, 0);
}

TEST(AttentionGpu, MergeStateAndAppend) {
  std::mt19937_64 rng(5);
  for (DType dt : FloatTypes()) {
    HostTensors m = MergeInputs(dt, 33, 8, rng);
    m["s_a"].values[0] = m["s_b"].values[0] = -INFINITY;
    m["s_a"].values[1] = -INFINITY;
    for (const std::string alias : {"", "v", "s"}) {
      OpRun r = RunOnCuda("merge_state", m, {}, "cuda", alias);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      ExpectClose("merge_state", m, {}, r.outputs);
    }
  }
  for (DType dt : Half16()) {
    const AttnCase c = Shaped(dt, 8, 8, 128, {1, 16, 17, 40});
    HostTensors cache = Without(MakePaged(c), kQo);
    HostTensors in = AppendInputs(c, cache, {0, 1, 2, 3, 3, 3}, {0, 15, 16, 39, 0, 20}, rng);
    OpRun r = RunOnCuda("append_paged_kv_cache", in, {});
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("append_paged_kv_cache", in, {}, r.outputs), "");
  }
}

// Each hostile edit: the CUDA impl refuses it with the CPU's message,
// whether it reads its flag itself or leaves that to the caller's wait
// (KernelContext::defer_checks, as the daemon's worker runs it); the good
// inputs pass both ways.
TEST(AttentionGpu, HostileIndicesRefusedAsOnTheCpu) {
  const HostileInputs h = MakeHostileInputs();
  for (bool defer : {true, false})
    for (const HostileOp& op : HostileOps(h)) {
      SCOPED_TRACE(op.op + (defer ? " deferred" : " at once"));
      EXPECT_TRUE(RunOnCuda(op.op, *op.good, op.attrs, "cuda", "", 0, defer).status.ok());
      for (const HostileEdit& e : HostileEdits(op.op)) {
        SCOPED_TRACE(e.what);
        OpRun g = RunOnCuda(op.op, Edited(*op.good, e), op.attrs, "cuda", "", 0, defer);
        EXPECT_EQ(g.status.code(), StatusCode::kInvalidArgument);
        EXPECT_EQ(g.status.message(), e.message);
      }
    }
}

// A caller that sets defer_checks and never runs the check: the binding
// has not synchronized (the kernels may still run), and dropping the
// check waits for them before its flag goes back to the pool.
TEST(AttentionGpu, DeferredCheckLeftUnrunIsSafe) {
  const HostileInputs h = MakeHostileInputs();
  const HostileOp op = HostileOps(h).front();  // a copy: the vector is a temporary
  const OpDef* def = OpRegistry::Global().Find(op.op);
  ASSERT_NE(def, nullptr);
  for (int i = 0; i < 3; ++i) {
    CudaTarget gpu;
    KernelContext ctx;
    gpu.Bind(&ctx);
    HostTensors edited = Edited(*op.good, HostileEdits(op.op).front());
    std::vector<std::string> keep;
    ctx.inputs.resize(def->inputs.size());
    for (size_t k = 0; k < def->inputs.size(); ++k) {
      auto it = edited.find(def->inputs[k].name);
      if (it == edited.end()) continue;
      keep.push_back(Encode(it->second.dtype, it->second.values));
      TensorView& v = ctx.inputs[k];
      v.data = gpu.Alloc(keep.back().size(), it->second.dtype, &keep.back());
      v.device = ctx.device.device;
      v.dtype = it->second.dtype;
      v.shape = it->second.shape;
    }
    ASSERT_TRUE(PrepareCall(
                    *def, op.attrs, "",
                    [&](const OutputSpec& spec, int64_t bytes) {
                      return gpu.Alloc(static_cast<size_t>(bytes), spec.dtype, nullptr);
                    },
                    &ctx)
                    .ok());
    const ImplDef* impl = def->FindImpl("cuda");
    ASSERT_NE(impl, nullptr);
    ASSERT_TRUE(Call(*impl, ctx).ok());  // the refusal is in the check left behind
    ASSERT_TRUE(static_cast<bool>(ctx.deferred));
    if (i == 2) {
      const Status st = RunDeferred(&ctx);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_FALSE(static_cast<bool>(ctx.deferred));
    }
  }  // i < 2: ctx dropped with its check unrun, before gpu frees the memory
}

// The same cache edits on a prefill long enough for the tiled kernel (and
// its qo_indptr edited): refused as on the CPU.
TEST(AttentionGpu, HostileIndicesRefusedByTheTiledPrefill) {
  AttnCase c = HostileCase();
  c.qo_lens = {40, 30, 20};
  ASSERT_TRUE(Tiled(c));
  const HostTensors good = MakePaged(c);
  std::vector<HostileEdit> edits = PagedHostileEdits("batch_prefill_paged");
  edits.push_back({"qo beyond q", "qo_indptr", 2, 91, ""});
  edits.push_back({"qo decreasing", "qo_indptr", 2, 10, ""});
  edits.push_back({"qo start", "qo_indptr", 0, 5, ""});
  for (const HostileEdit& e : edits) {
    SCOPED_TRACE(e.what);
    const HostTensors in = Edited(good, e);
    OpRun g = RunOnCuda("batch_prefill_paged", in, {{"causal", true}});
    OpRun h = RunOnCpu("batch_prefill_paged", in, {{"causal", true}});
    EXPECT_EQ(g.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(h.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(g.status.message(), h.status.message());
  }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
