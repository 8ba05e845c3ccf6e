// The attention ops on the CPU against their float64 references:
// batch_decode_paged, batch_prefill_paged, batch_prefill_ragged,
// merge_state and append_paged_kv_cache over dtypes x GQA groups (1, 4, 8,
// MQA) x head_dim (64, 128, 256) x page sizes, with tails (kv_len 1,
// page_size - 1, page_size + 1, empty caches), poisoned outputs and
// misaligned views; decode against prefill with qo_len 1; merge_state
// against attention over the concatenation; and every hostile index,
// each refused with its exact message before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/attention/plan.h"
#include "op_runner.h"
#include "ops/batch_decode_paged/attention_cases.h"

namespace kerneld::testing {
namespace {

const std::vector<std::string> kQo = {"qo_indptr"};

void ExpectDecodeMatches(const AttnCase& c, const AttrMap& attrs = {}, size_t misalign = 0) {
  SCOPED_TRACE(c.Name());
  const HostTensors in = Without(MakePaged(c), kQo);
  OpRun r = RunOnCpu("batch_decode_paged", in, attrs, "", misalign);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference("batch_decode_paged", in, attrs, r.outputs), "");
}

// Heads: GQA groups 1, 4 and 8, and MQA (one kv head).
const HeadPairs kHeads = {{4, 4}, {8, 2}, {16, 2}, {8, 1}};

TEST(BatchDecodePaged, MatchesReferenceAcrossGroupsHeadDimsAndTails) {
  AttnCase base;
  base.kv_lens = DecodeTailLens();
  for (const AttnCase& c : HeadSweep(base, FloatTypes(), kHeads, [](const AttnCase& c) {
         return static_cast<uint64_t>(c.hq * 1000 + c.d);
       }))
    ExpectDecodeMatches(c);
}

TEST(BatchDecodePaged, AnyPageSizeAttrsAndMisaligned) {
  for (int64_t ps : {1, 3, 16, 64}) {
    AttnCase c;
    c.dtype = DType::kBFloat16;
    c.page_size = ps;
    c.kv_lens = {1, ps, ps + 1, 3 * ps - 1};
    ExpectDecodeMatches(c);
  }
  AttnCase c;
  c.kv_lens = {33, 7};
  ExpectDecodeMatches(c, {{"sm_scale", 0.3}});
  ExpectDecodeMatches(c, {{"logits_soft_cap", 2.5}});
  ExpectDecodeMatches(c, {{"sm_scale", 1.0}, {"logits_soft_cap", 5.0}});
  ExpectDecodeMatches(c, {}, /*misalign=*/2);
}

TEST(BatchDecodePaged, EmptyCacheGivesZeroAndMinusInfinity) {
  AttnCase c;
  c.dtype = DType::kFloat32;
  c.kv_lens = {0, 0};
  HostTensors in = Without(MakePaged(c), kQo);
  in["kv_last_page_len"].values = {99, -4};  // not read: no pages
  OpRun r = RunOnCpu("batch_decode_paged", in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (double v : r.outputs["o"].values) EXPECT_EQ(v, 0);
  for (double v : r.outputs["lse"].values) EXPECT_EQ(v, -std::numeric_limits<double>::infinity());
}

TEST(BatchDecodePaged, EqualsPrefillWithOneQueryRow) {
  for (DType dt : FloatTypes()) {
    auto [d, p] =
        DecodeAndOneRowPrefill(Shaped(dt, 16, 4, 64, {5, 16, 0, 70}, {1, 1, 1, 1}),
                               [](const std::string& op, const HostTensors& in,
                                  const AttrMap& attrs) { return RunOnCpu(op, in, attrs); });
    ASSERT_TRUE(p.status.ok() && d.status.ok()) << p.status.ToString() << d.status.ToString();
    EXPECT_EQ(p.outputs["o"].values, d.outputs["o"].values);
    EXPECT_EQ(p.outputs["lse"].values, d.outputs["lse"].values);
  }
}

TEST(BatchPrefillPaged, MatchesReferenceCausalAndNot) {
  AttnCase base;
  // qo_len > kv_len (rows that see nothing when causal), = kv_len, <, empty both ways.
  base.kv_lens = {1, 15, 17, 0, 9, 20};
  base.qo_lens = {3, 15, 4, 2, 0, 20};
  for (const AttnCase& c : HeadSweep(base, FloatTypes(), kHeads, [](const AttnCase& c) {
         return static_cast<uint64_t>(c.d + c.hq);
       }))
    for (bool causal : {false, true}) {
      SCOPED_TRACE(c.Name() + (causal ? " causal" : ""));
      const AttrMap attrs = {{"causal", causal}};
      const HostTensors in = MakePaged(c);
      OpRun r = RunOnCpu("batch_prefill_paged", in, attrs);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(CheckAgainstReference("batch_prefill_paged", in, attrs, r.outputs), "");
    }
}

TEST(BatchPrefillRagged, MatchesReferenceAndThePagedCache) {
  for (DType dt : FloatTypes())
    for (bool causal : {false, true}) {
      AttnCase c = Shaped(dt, 16, 2, 128, {1, 4, 6, 0, 31}, {1, 6, 6, 3, 12});
      c.page_size = 5;
      SCOPED_TRACE(c.Name() + (causal ? " causal" : ""));
      HostTensors ragged;
      const HostTensors paged = MakePaged(c, &ragged);
      const AttrMap attrs = {{"causal", causal}, {"logits_soft_cap", 4.0}};
      OpRun r = RunOnCpu("batch_prefill_ragged", ragged, attrs, "", /*misalign=*/4);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(CheckAgainstReference("batch_prefill_ragged", ragged, attrs, r.outputs), "");
      OpRun p = RunOnCpu("batch_prefill_paged", paged, attrs);
      ASSERT_TRUE(p.status.ok()) << p.status.ToString();
      EXPECT_EQ(r.outputs["o"].values, p.outputs["o"].values);
      EXPECT_EQ(r.outputs["lse"].values, p.outputs["lse"].values);
    }
}

// Attention over a request's first pages and over the rest, merged, is the
// attention over all of them.
TEST(MergeState, EqualsAttentionOverTheConcatenation) {
  for (DType dt : FloatTypes()) {
    AttnCase c;
    c.dtype = dt;
    c.kv_lens = {40, 17, 16, 5};
    HostTensors all = Without(MakePaged(c), kQo);
    // Split each request's pages: the first page in part a, the rest in b.
    HostTensors a = all, b = all;
    const auto& ip = all["kv_indptr"].values;
    const auto& ix = all["kv_indices"].values;
    std::vector<int64_t> ipa{0}, ipb{0}, ixa, ixb, la, lb;
    for (size_t r = 0; r + 1 < ip.size(); ++r) {
      const auto begin = static_cast<size_t>(ip[r]), end = static_cast<size_t>(ip[r + 1]);
      ixa.push_back(static_cast<int64_t>(ix[begin]));
      la.push_back(end - begin == 1 ? static_cast<int64_t>(all["kv_last_page_len"].values[r])
                                    : c.page_size);
      for (size_t k = begin + 1; k < end; ++k) ixb.push_back(static_cast<int64_t>(ix[k]));
      lb.push_back(static_cast<int64_t>(all["kv_last_page_len"].values[r]));
      ipa.push_back(static_cast<int64_t>(ixa.size()));
      ipb.push_back(static_cast<int64_t>(ixb.size()));
    }
    const int64_t batch = static_cast<int64_t>(la.size());
    a["kv_indptr"] = Ints32({batch + 1}, ipa);
    a["kv_indices"] = Ints32({static_cast<int64_t>(ixa.size())}, ixa);
    a["kv_last_page_len"] = Ints32({batch}, la);
    b["kv_indptr"] = Ints32({batch + 1}, ipb);
    b["kv_indices"] = Ints32({static_cast<int64_t>(ixb.size())}, ixb);
    b["kv_last_page_len"] = Ints32({batch}, lb);
    HostTensors ra, rb, rall;
    std::string err;
    ASSERT_TRUE(Reference("batch_decode_paged", a, {}, &ra, &err)) << err;
    ASSERT_TRUE(Reference("batch_decode_paged", b, {}, &rb, &err)) << err;
    ASSERT_TRUE(Reference("batch_decode_paged", all, {}, &rall, &err)) << err;
    // float32 partial outputs: the merge's own error, not the partials' rounding.
    ra["o"].dtype = rb["o"].dtype = DType::kFloat32;
    const HostTensors m = {
        {"v_a", ra["o"]}, {"s_a", ra["lse"]}, {"v_b", rb["o"]}, {"s_b", rb["lse"]}};
    OpRun r = RunOnCpu("merge_state", m, {});
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("merge_state", m, {}, r.outputs), "");
    const Comparison cv = Compare(r.outputs["v"].values, rall["o"].values, 1e-2, 1e-2);
    EXPECT_EQ(cv.mismatches, 0) << DTypeName(dt) << " max err " << cv.max_abs_err;
    const Comparison cs = Compare(r.outputs["s"].values, rall["lse"].values, 1e-5, 1e-5);
    EXPECT_EQ(cs.mismatches, 0) << DTypeName(dt) << " max err " << cs.max_abs_err;
  }
}

TEST(MergeState, MatchesReferenceInPlaceAndEmptySides) {
  std::mt19937_64 rng(5);
  const double ninf = -std::numeric_limits<double>::infinity();
  for (DType dt : FloatTypes()) {
    HostTensors m = MergeInputs(dt, 7, 4, rng);
    m["s_a"].values[0] = ninf;                       // a empty: b's
    m["s_b"].values[1] = ninf;                       // b empty: a's
    m["s_a"].values[2] = m["s_b"].values[2] = ninf;  // both: 0 and -inf
    for (const std::string alias : {"", "v", "s"}) {
      OpRun r = RunOnCpu("merge_state", m, {}, alias, alias.empty() ? 0 : 4);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(CheckAgainstReference("merge_state", m, {}, r.outputs), "") << alias;
      EXPECT_EQ(r.outputs["s"].values[2], ninf);
      for (int e = 0; e < 128; ++e) EXPECT_EQ(r.outputs["v"].values[2 * 128 + e], 0);
    }
  }
}

TEST(AppendPagedKvCache, WritesEachEntryInPlaceThenDecodeSeesIt) {
  for (DType dt : FloatTypes()) {
    const AttnCase c = Shaped(dt, 8, 4, 128, {1, 16, 17, 40});
    HostTensors cache = Without(MakePaged(c), kQo);
    std::mt19937_64 rng(9);
    // A decode step (the last slot of each request) and a prefill's worth.
    HostTensors in = AppendInputs(c, cache, {0, 1, 2, 3, 3, 3}, {0, 15, 16, 39, 0, 20}, rng);
    OpRun r = RunOnCpu("append_paged_kv_cache", in, {}, "", /*misalign=*/2);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("append_paged_kv_cache", in, {}, r.outputs), "");
    // What was written is what the next decode reads.
    cache["k_cache"] = r.outputs["k_cache"];
    cache["v_cache"] = r.outputs["v_cache"];
    OpRun d = RunOnCpu("batch_decode_paged", cache, {});
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(CheckAgainstReference("batch_decode_paged", cache, {}, d.outputs), "");
  }
}

// ----- hostile indices --------------------------------------------------------

// Each edit refused with its exact message, by the impl and the reference.
void ExpectRefused(const HostileOp& h) {
  const OpRun ok = RunOnCpu(h.op, *h.good, h.attrs);
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  for (const HostileEdit& e : HostileEdits(h.op)) {
    SCOPED_TRACE(h.op + ": " + e.what);
    const HostTensors in = Edited(*h.good, e);
    OpRun r = RunOnCpu(h.op, in, h.attrs);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status.message(), e.message);
    HostTensors ref;
    std::string err;
    EXPECT_FALSE(Reference(h.op, in, h.attrs, &ref, &err));
    EXPECT_EQ(err, e.message);
  }
}

TEST(AttentionHostileIndices, EveryOpRefusesEveryEdit) {
  const HostileInputs h = MakeHostileInputs();
  for (const HostileOp& op : HostileOps(h)) ExpectRefused(op);
}

TEST(AttentionHostileIndices, AppendPositionFarPastTheCache) {
  HostTensors bad = MakeHostileInputs().append;
  bad["positions"].values[1] = 1 << 30;
  OpRun r = RunOnCpu("append_paged_kv_cache", bad, {});
  ASSERT_EQ(r.status.code(), StatusCode::kInvalidArgument);
}

TEST(AttentionSchema, ShapeErrors) {
  const AttnCase c = HostileCase();
  const HostTensors in = MakeHostileInputs().decode;
  HostTensors bad = in;
  bad["kv_indptr"] = Ints32({3}, {0, 1, 3});
  OpRun r = RunOnCpu("batch_decode_paged", bad, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(),
            "batch_decode_paged: 'kv_indptr' dim 0 ('indptr_len'): expected batch + 1 = 4, got 3");
  bad = in;
  std::mt19937_64 rng(1);
  bad["q"] = Random(c.dtype, {3, 7, c.d}, rng);
  r = RunOnCpu("batch_decode_paged", bad, {});
  EXPECT_EQ(r.status.message(),
            "batch_decode_paged: 'q' dim 1 ('num_qo_heads'): expected a multiple of "
            "num_kv_heads=2, got 7");
  bad = in;
  bad["kv_indices"].dtype = DType::kInt64;
  r = RunOnCpu("batch_decode_paged", bad, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
}

// The CUDA decode's plan (plain C++): the heads a block packs into its 16
// M rows, and how many chunks a request's keys split into.
TEST(AttentionPlan, DecodePacksAndChunks) {
  using cuda::attention::DecodeMmaChunks;
  using cuda::attention::DecodePack;
  EXPECT_EQ(DecodePack(1), 1);
  EXPECT_EQ(DecodePack(3), 3);
  EXPECT_EQ(DecodePack(4), 4);
  EXPECT_EQ(DecodePack(12), 12);
  EXPECT_EQ(DecodePack(32), 16);
  EXPECT_EQ(DecodePack(17), 1);  // a prime over 16: one head a block
  EXPECT_EQ(DecodePack(48), 16);
  EXPECT_EQ(DecodePack(20), 10);
  // 132 SMs, two blocks each: 264 slots.
  EXPECT_EQ(DecodeMmaChunks(1, 8, 32768, 132), 33);    // one request: fill the device
  EXPECT_EQ(DecodeMmaChunks(16, 8, 8192, 132), 2);     // 128 blocks: two chunks fill it
  EXPECT_EQ(DecodeMmaChunks(64, 8, 8192, 132), 1);     // 512 blocks already do
  EXPECT_EQ(DecodeMmaChunks(1, 8, 512, 132), 4);       // no chunk under 128 keys
  EXPECT_EQ(DecodeMmaChunks(1, 1, 1 << 30, 132), 64);  // at most 64
  EXPECT_EQ(DecodeMmaChunks(1, 8, 0, 132), 1);
  EXPECT_EQ(DecodeMmaChunks(0, 8, 100, 132), 1);
}

}  // namespace
}  // namespace kerneld::testing
