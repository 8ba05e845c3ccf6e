// The attention ops on CUDA against the float64 references (o within the
// dtype's tolerance; lse within 1e-4, the kernels' fast exp/log) and the
// CPU: decode over GQA groups 1, 4, 8 and MQA, head_dim 64 / 128 / 256,
// page tails and empty caches, long caches that take the split-KV path;
// prefill paged and ragged, causal or not; merge_state; the append then a
// decode of what it wrote; and every hostile index refused with the CPU's
// exact message. Run it under compute-sanitizer to see that a hostile
// index reads nothing out of bounds.
#include <gtest/gtest.h>

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
  const std::vector<std::pair<int64_t, int64_t>> heads = {
      {8, 8}, {16, 4}, {32, 4}, {8, 1}, {32, 1}};
  for (DType dt : Half16())
    for (auto [hq, hkv] : heads)
      for (int64_t d : {64, 128, 256}) {
        AttnCase c;
        c.dtype = dt;
        c.hq = hq;
        c.hkv = hkv;
        c.d = d;
        c.kv_lens = {1, 15, 17, 0, 40};
        c.seed = static_cast<uint64_t>(hq * 7 + hkv + d);
        ExpectDecode(c);
      }
}

TEST(AttentionGpu, DecodeLongCachesSplitKvAndAttrs) {
  for (DType dt : Half16()) {
    AttnCase c;
    c.dtype = dt;
    c.hq = 32;
    c.hkv = 8;
    c.d = 128;
    c.kv_lens = {8191};  // one request: many chunks
    ExpectDecode(c);
    c.kv_lens = {2049, 1, 4096, 300};
    ExpectDecode(c);
    ExpectDecode(c, {{"logits_soft_cap", 30.0}, {"sm_scale", 0.05}});
    c.page_size = 1;
    c.kv_lens = {700, 3};
    ExpectDecode(c);
  }
}

TEST(AttentionGpu, PrefillPagedAndRagged) {
  for (DType dt : Half16())
    for (int64_t d : {64, 128, 256})
      for (bool causal : {false, true}) {
        AttnCase c;
        c.dtype = dt;
        c.hq = 16;
        c.hkv = 4;
        c.d = d;
        c.kv_lens = {1, 15, 17, 0, 9, 300};
        c.qo_lens = {3, 15, 4, 2, 0, 260};
        SCOPED_TRACE(c.Name() + (causal ? " causal" : ""));
        const AttrMap attrs = {{"causal", causal}};
        HostTensors ragged;
        const HostTensors paged = MakePaged(c, &ragged);
        OpRun p = RunOnCuda("batch_prefill_paged", paged, attrs);
        ASSERT_TRUE(p.status.ok()) << p.status.ToString();
        ExpectClose("batch_prefill_paged", paged, attrs, p.outputs);
        OpRun r = RunOnCuda("batch_prefill_ragged", ragged, attrs);
        ASSERT_TRUE(r.status.ok()) << r.status.ToString();
        ExpectClose("batch_prefill_ragged", ragged, attrs, r.outputs);
      }
}

TEST(AttentionGpu, DecodeMatchesPrefillWithOneRow) {
  AttnCase c;
  c.dtype = DType::kBFloat16;
  c.hq = 32;
  c.hkv = 8;
  c.d = 128;
  c.kv_lens = {5, 16, 0, 1000};
  c.qo_lens = {1, 1, 1, 1};
  const HostTensors in = MakePaged(c);
  OpRun p = RunOnCuda("batch_prefill_paged", in, {{"causal", true}});
  OpRun d = RunOnCuda("batch_decode_paged", Without(in, kQo), {});
  ASSERT_TRUE(p.status.ok() && d.status.ok()) << p.status.ToString() << d.status.ToString();
  EXPECT_EQ(Compare(p.outputs["o"].values, d.outputs["o"].values, 1e-2, 1e-2).mismatches, 0);
  EXPECT_EQ(Compare(p.outputs["lse"].values, d.outputs["lse"].values, 1e-4, 1e-4).mismatches, 0);
}

TEST(AttentionGpu, MergeStateAndAppend) {
  std::mt19937_64 rng(5);
  for (DType dt : FloatTypes()) {
    HostTensors m = {{"v_a", Random(dt, {33, 8, 128}, rng)},
                     {"s_a", Random(DType::kFloat32, {33, 8}, rng, -5, 5)},
                     {"v_b", Random(dt, {33, 8, 128}, rng)},
                     {"s_b", Random(DType::kFloat32, {33, 8}, rng, -5, 5)}};
    m["s_a"].values[0] = m["s_b"].values[0] = -INFINITY;
    m["s_a"].values[1] = -INFINITY;
    for (const std::string alias : {"", "v", "s"}) {
      OpRun r = RunOnCuda("merge_state", m, {}, "cuda", alias);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      ExpectClose("merge_state", m, {}, r.outputs);
    }
  }
  for (DType dt : Half16()) {
    AttnCase c;
    c.dtype = dt;
    c.hkv = 8;
    c.d = 128;
    c.kv_lens = {1, 16, 17, 40};
    HostTensors cache = Without(MakePaged(c), kQo);
    HostTensors in = {{"append_key", Random(dt, {6, c.hkv, c.d}, rng)},
                      {"append_value", Random(dt, {6, c.hkv, c.d}, rng)},
                      {"batch_indices", Ints32({6}, {0, 1, 2, 3, 3, 3})},
                      {"positions", Ints32({6}, {0, 15, 16, 39, 0, 20})}};
    for (const char* n : {"k_cache", "v_cache", "kv_indices", "kv_indptr", "kv_last_page_len"})
      in[n] = cache[n];
    OpRun r = RunOnCuda("append_paged_kv_cache", in, {});
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("append_paged_kv_cache", in, {}, r.outputs), "");
  }
}

// Each hostile edit: the CUDA impl refuses it with the CPU's message.
TEST(AttentionGpu, HostileIndicesRefusedAsOnTheCpu) {
  AttnCase c;
  c.kv_lens = {5, 20, 0};
  HostTensors decode = MakePaged(c);
  c.qo_lens = {2, 3, 1};
  HostTensors ragged;
  HostTensors prefill = MakePaged(c, &ragged);
  std::mt19937_64 rng(3);
  HostTensors append = {{"append_key", Random(c.dtype, {2, c.hkv, c.d}, rng)},
                        {"append_value", Random(c.dtype, {2, c.hkv, c.d}, rng)},
                        {"batch_indices", Ints32({2}, {0, 1})},
                        {"positions", Ints32({2}, {4, 19})}};
  for (const char* n : {"k_cache", "v_cache", "kv_indices", "kv_indptr", "kv_last_page_len"})
    append[n] = decode[n];
  struct Edit {
    const char* name;
    size_t i;
    double v;
  };
  const std::vector<Edit> paged_edits = {{"kv_indptr", 0, -1},        {"kv_indptr", 2, 0},
                                         {"kv_indptr", 3, 4},         {"kv_indices", 2, 6},
                                         {"kv_indices", 0, -3},       {"kv_indices", 1, 2147483647},
                                         {"kv_last_page_len", 1, 17}, {"kv_last_page_len", 0, 0}};
  auto check = [](const std::string& op, const HostTensors& good, const std::vector<Edit>& edits) {
    for (const Edit& e : edits) {
      HostTensors in = good;
      in[e.name].values[e.i] = e.v;
      SCOPED_TRACE(op + " " + e.name + "[" + std::to_string(e.i) + "] = " + std::to_string(e.v));
      OpRun g = RunOnCuda(op, in, {});
      OpRun h = RunOnCpu(op, in, {});
      EXPECT_EQ(g.status.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(g.status.message(), h.status.message());
    }
  };
  check("batch_decode_paged", decode, paged_edits);
  std::vector<Edit> prefill_edits = paged_edits;
  prefill_edits.insert(prefill_edits.end(),
                       {{"qo_indptr", 0, 1}, {"qo_indptr", 2, 1}, {"qo_indptr", 3, 7}});
  check("batch_prefill_paged", prefill, prefill_edits);
  check("batch_prefill_ragged", ragged,
        {{"kv_indptr", 0, 2}, {"kv_indptr", 2, 4}, {"kv_indptr", 2, 26}, {"qo_indptr", 1, 100}});
  std::vector<Edit> append_edits = paged_edits;
  append_edits.insert(append_edits.end(), {{"batch_indices", 1, 3},
                                           {"batch_indices", 0, -1},
                                           {"positions", 0, 5},
                                           {"positions", 1, -1},
                                           {"batch_indices", 1, 2}});
  check("append_paged_kv_cache", append, append_edits);
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
