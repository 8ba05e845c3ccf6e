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

TEST(BatchDecodePaged, MatchesReferenceAcrossGroupsHeadDimsAndTails) {
  // Heads: GQA groups 1, 4 and 8, and MQA (one kv head).
  const std::vector<std::pair<int64_t, int64_t>> heads = {{4, 4}, {8, 2}, {16, 2}, {8, 1}};
  for (DType dt : FloatTypes())
    for (auto [hq, hkv] : heads)
      for (int64_t d : {64, 128, 256}) {
        AttnCase c;
        c.dtype = dt;
        c.hq = hq;
        c.hkv = hkv;
        c.d = d;
        c.kv_lens = {1, 15, 17, 0, 40};  // 1, page_size -+ 1, an empty cache, several pages
        c.seed = static_cast<uint64_t>(hq * 1000 + d);
        ExpectDecodeMatches(c);
      }
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
    AttnCase c;
    c.dtype = dt;
    c.hq = 16;
    c.hkv = 4;
    c.kv_lens = {5, 16, 0, 70};
    c.qo_lens = {1, 1, 1, 1};
    const HostTensors in = MakePaged(c);
    OpRun p = RunOnCpu("batch_prefill_paged", in, {{"causal", true}});
    OpRun d = RunOnCpu("batch_decode_paged", Without(in, kQo), {});
    ASSERT_TRUE(p.status.ok() && d.status.ok()) << p.status.ToString() << d.status.ToString();
    EXPECT_EQ(p.outputs["o"].values, d.outputs["o"].values);
    EXPECT_EQ(p.outputs["lse"].values, d.outputs["lse"].values);
  }
}

TEST(BatchPrefillPaged, MatchesReferenceCausalAndNot) {
  const std::vector<std::pair<int64_t, int64_t>> heads = {{4, 4}, {8, 2}, {16, 2}, {8, 1}};
  for (DType dt : FloatTypes())
    for (auto [hq, hkv] : heads)
      for (int64_t d : {64, 128, 256})
        for (bool causal : {false, true}) {
          AttnCase c;
          c.dtype = dt;
          c.hq = hq;
          c.hkv = hkv;
          c.d = d;
          // qo_len > kv_len (rows that see nothing when causal), = kv_len, <, empty both ways.
          c.kv_lens = {1, 15, 17, 0, 9, 20};
          c.qo_lens = {3, 15, 4, 2, 0, 20};
          c.seed = static_cast<uint64_t>(d + hq);
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
      AttnCase c;
      c.dtype = dt;
      c.hq = 16;
      c.hkv = 2;
      c.d = 128;
      c.page_size = 5;
      c.kv_lens = {1, 4, 6, 0, 31};
      c.qo_lens = {1, 6, 6, 3, 12};
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
    HostTensors m = {{"v_a", Random(dt, {7, 4, 128}, rng)},
                     {"s_a", Random(DType::kFloat32, {7, 4}, rng, -5, 5)},
                     {"v_b", Random(dt, {7, 4, 128}, rng)},
                     {"s_b", Random(DType::kFloat32, {7, 4}, rng, -5, 5)}};
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
    AttnCase c;
    c.dtype = dt;
    c.hkv = 4;
    c.d = 128;
    c.kv_lens = {1, 16, 17, 40};
    HostTensors cache = Without(MakePaged(c), kQo);
    std::mt19937_64 rng(9);
    // A decode step (the last slot of each request) and a prefill's worth.
    HostTensors in = {{"append_key", Random(dt, {6, c.hkv, c.d}, rng)},
                      {"append_value", Random(dt, {6, c.hkv, c.d}, rng)},
                      {"batch_indices", Ints32({6}, {0, 1, 2, 3, 3, 3})},
                      {"positions", Ints32({6}, {0, 15, 16, 39, 0, 20})}};
    for (const char* n : {"k_cache", "v_cache", "kv_indices", "kv_indptr", "kv_last_page_len"})
      in[n] = cache[n];
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

struct Hostile {
  const char* what;
  std::function<void(HostTensors*)> edit;
  std::string message;
};

void ExpectRefused(const std::string& op, const HostTensors& good, const AttrMap& attrs,
                   const std::vector<Hostile>& cases) {
  const OpRun ok = RunOnCpu(op, good, attrs);
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  for (const Hostile& h : cases) {
    SCOPED_TRACE(op + ": " + h.what);
    HostTensors in = good;
    h.edit(&in);
    OpRun r = RunOnCpu(op, in, attrs);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status.message(), h.message);
    HostTensors ref;
    std::string err;
    EXPECT_FALSE(Reference(op, in, attrs, &ref, &err));
    EXPECT_EQ(err, h.message);
  }
}

// kv_lens {5, 20, 0}, page 16: indptr {0, 1, 3, 3}, last {5, 4, 0}, 3 spare pages.
AttnCase HostileCase() {
  AttnCase c;
  c.kv_lens = {5, 20, 0};
  c.qo_lens = {2, 3, 1};
  return c;
}

std::vector<Hostile> PagedHostile(const std::string& op) {
  auto set = [](const char* n, size_t i, double v) {
    return [n, i, v](HostTensors* in) { (*in)[n].values[i] = v; };
  };
  return {
      {"negative start", set("kv_indptr", 0, -1),
       op + ": request 0: 'kv_indptr'[0] = -1 is negative"},
      {"decreasing", set("kv_indptr", 2, 0),
       op + ": request 1: 'kv_indptr'[2] = 0 is less than 'kv_indptr'[1] = 1 (an indptr never "
            "decreases)"},
      {"beyond indices", set("kv_indptr", 3, 4),
       op + ": request 2: 'kv_indptr'[3] = 4 is beyond the 3 entries of 'kv_indices'"},
      {"page out of range", set("kv_indices", 2, 6),
       op + ": request 1: 'kv_indices'[2] = 6 (its page 1) is not a page in [0, max_pages=6)"},
      {"negative page", set("kv_indices", 0, -3),
       op + ": request 0: 'kv_indices'[0] = -3 (its page 0) is not a page in [0, max_pages=6)"},
      {"huge page", set("kv_indices", 1, 2147483647),
       op + ": request 1: 'kv_indices'[1] = 2147483647 (its page 0) is not a page in [0, "
            "max_pages=6)"},
      {"last page over page_size", set("kv_last_page_len", 1, 17),
       op + ": request 1: 'kv_last_page_len'[1] = 17 is not in [1, page_size=16]"},
      {"last page empty", set("kv_last_page_len", 0, 0),
       op + ": request 0: 'kv_last_page_len'[0] = 0 is not in [1, page_size=16]"},
  };
}

TEST(AttentionHostileIndices, DecodeAndPrefillPaged) {
  AttnCase decode = HostileCase();
  decode.qo_lens.clear();
  ExpectRefused("batch_decode_paged", MakePaged(decode), {}, PagedHostile("batch_decode_paged"));
  const HostTensors paged = MakePaged(HostileCase());
  std::vector<Hostile> cases = PagedHostile("batch_prefill_paged");
  auto set = [](size_t i, double v) {
    return [i, v](HostTensors* in) { (*in)["qo_indptr"].values[i] = v; };
  };
  // qo_indptr is {0, 2, 5, 6} over 6 rows of q.
  cases.push_back(
      {"qo start", set(0, 1), "batch_prefill_paged: request 0: 'qo_indptr'[0] = 1, expected 0"});
  cases.push_back({"qo decreasing", set(2, 1),
                   "batch_prefill_paged: request 1: 'qo_indptr'[2] = 1 is less than "
                   "'qo_indptr'[1] = 2 (an indptr never decreases)"});
  cases.push_back(
      {"qo beyond q", set(3, 7),
       "batch_prefill_paged: request 2: 'qo_indptr'[3] = 7 is beyond the 6 rows of 'q'"});
  cases.push_back({"qo short of q", set(3, 5),
                   "batch_prefill_paged: 'qo_indptr'[3] = 5, expected 6 (the rows of 'q')"});
  ExpectRefused("batch_prefill_paged", paged, {{"causal", true}}, cases);
}

TEST(AttentionHostileIndices, PrefillRagged) {
  HostTensors ragged;
  MakePaged(HostileCase(), &ragged);  // kv_indptr {0, 5, 25, 25} over 25 rows of k
  auto set = [](const char* n, size_t i, double v) {
    return [n, i, v](HostTensors* in) { (*in)[n].values[i] = v; };
  };
  const std::string op = "batch_prefill_ragged";
  ExpectRefused(
      op, ragged, {},
      {{"kv start", set("kv_indptr", 0, 2), op + ": request 0: 'kv_indptr'[0] = 2, expected 0"},
       {"kv decreasing", set("kv_indptr", 2, 4),
        op + ": request 1: 'kv_indptr'[2] = 4 is less than 'kv_indptr'[1] = 5 (an "
             "indptr never decreases)"},
       {"kv beyond k", set("kv_indptr", 2, 26),
        op + ": request 1: 'kv_indptr'[2] = 26 is beyond the 25 rows of 'k'"},
       {"kv short of k", set("kv_indptr", 3, 24),
        op + ": request 2: 'kv_indptr'[3] = 24 is less than 'kv_indptr'[2] = 25 (an "
             "indptr never decreases)"},
       {"qo beyond q", set("qo_indptr", 1, 100),
        op + ": request 0: 'qo_indptr'[1] = 100 is beyond the 6 rows of 'q'"}});
}

TEST(AttentionHostileIndices, AppendWritesNothing) {
  AttnCase c = HostileCase();
  c.qo_lens.clear();
  HostTensors cache = MakePaged(c);
  std::mt19937_64 rng(3);
  HostTensors in = {{"append_key", Random(c.dtype, {2, c.hkv, c.d}, rng)},
                    {"append_value", Random(c.dtype, {2, c.hkv, c.d}, rng)},
                    {"batch_indices", Ints32({2}, {0, 1})},
                    {"positions", Ints32({2}, {4, 19})}};
  for (const char* n : {"k_cache", "v_cache", "kv_indices", "kv_indptr", "kv_last_page_len"})
    in[n] = cache[n];
  const std::string op = "append_paged_kv_cache";
  auto set = [](const char* n, size_t i, double v) {
    return [n, i, v](HostTensors* t) { (*t)[n].values[i] = v; };
  };
  std::vector<Hostile> cases = PagedHostile(op);
  cases.push_back({"batch index", set("batch_indices", 1, 3),
                   op + ": entry 1: 'batch_indices'[1] = 3 is not a request in [0, batch=3)"});
  cases.push_back({"negative batch index", set("batch_indices", 0, -1),
                   op + ": entry 0: 'batch_indices'[0] = -1 is not a request in [0, batch=3)"});
  cases.push_back({"position past kv_len", set("positions", 0, 5),
                   op + ": entry 0 (request 0): 'positions'[0] = 5 is not in [0, kv_len=5) of "
                        "the request's pages"});
  cases.push_back({"negative position", set("positions", 1, -1),
                   op + ": entry 1 (request 1): 'positions'[1] = -1 is not in [0, kv_len=20) of "
                        "the request's pages"});
  cases.push_back({"request without pages", set("batch_indices", 1, 2),
                   op + ": entry 1 (request 2): 'positions'[1] = 19 is not in [0, kv_len=0) of "
                        "the request's pages"});
  ExpectRefused(op, in, {}, cases);
  // Refused in place: the caches are as they were.
  HostTensors bad = in;
  bad["positions"].values[1] = 1 << 30;
  OpRun r = RunOnCpu(op, bad, {});
  ASSERT_EQ(r.status.code(), StatusCode::kInvalidArgument);
}

TEST(AttentionSchema, ShapeErrors) {
  AttnCase c = HostileCase();
  c.qo_lens.clear();
  HostTensors in = MakePaged(c);
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

}  // namespace
}  // namespace kerneld::testing
