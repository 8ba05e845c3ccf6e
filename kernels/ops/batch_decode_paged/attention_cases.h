// Test inputs of the attention ops, shared by the CPU and GPU tests: paged
// caches whose requests own shuffled pages (with spare pages nobody owns),
// the same keys as a ragged k / v, and query rows per request; the sweeps
// over dtypes x heads x head_dim; append and merge_state inputs; and every
// hostile index edit with the message it must get.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kerneld/host_tensor.h"

namespace kerneld::testing {

struct AttnCase {
  DType dtype = DType::kFloat16;
  int64_t hq = 8, hkv = 2, d = 64, page_size = 16;
  std::vector<int64_t> kv_lens;  // keys per request
  std::vector<int64_t> qo_lens;  // query rows per request (prefill); empty: 1 each
  int64_t spare_pages = 3;       // pages no request owns
  uint64_t seed = 1;

  std::string Name() const {
    std::string s = std::string(DTypeName(dtype)) + " hq" + std::to_string(hq) + " hkv" +
                    std::to_string(hkv) + " d" + std::to_string(d) + " page" +
                    std::to_string(page_size) + " kv";
    for (int64_t l : kv_lens) s += " " + std::to_string(l);
    if (!qo_lens.empty()) {
      s += " qo";
      for (int64_t l : qo_lens) s += " " + std::to_string(l);
    }
    return s;
  }
};

// A case of dtype, heads, head_dim and requests (page size 16, seed 1).
inline AttnCase Shaped(DType dt, int64_t hq, int64_t hkv, int64_t d, std::vector<int64_t> kv_lens,
                       std::vector<int64_t> qo_lens = {}) {
  AttnCase c;
  c.dtype = dt;
  c.hq = hq;
  c.hkv = hkv;
  c.d = d;
  c.kv_lens = std::move(kv_lens);
  c.qo_lens = std::move(qo_lens);
  return c;
}

inline HostTensor Ints32(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  HostTensor t{DType::kInt32, std::move(shape), {}};
  for (int64_t x : v) t.values.push_back(static_cast<double>(x));
  return t;
}

// Paged inputs (q, k_cache, v_cache, kv_indptr, kv_indices,
// kv_last_page_len; qo_indptr when qo_lens is set), plus the same keys as
// ragged "k" / "v" in *ragged (when given; with q, qo_indptr, kv_indptr).
inline HostTensors MakePaged(const AttnCase& c, HostTensors* ragged = nullptr) {
  std::mt19937_64 rng(c.seed);
  const auto batch = static_cast<int64_t>(c.kv_lens.size());
  std::vector<int64_t> indptr{0}, last;
  for (int64_t l : c.kv_lens) {
    const int64_t pages = (l + c.page_size - 1) / c.page_size;
    indptr.push_back(indptr.back() + pages);
    last.push_back(pages == 0 ? 0 : l - (pages - 1) * c.page_size);
  }
  const int64_t max_pages = indptr.back() + c.spare_pages;
  std::vector<int64_t> perm(static_cast<size_t>(max_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> indices(perm.begin(), perm.begin() + indptr.back());
  const std::vector<int64_t> cache = {max_pages, c.page_size, c.hkv, c.d};
  HostTensors in;
  in["k_cache"] = Random(c.dtype, cache, rng);
  in["v_cache"] = Random(c.dtype, cache, rng);
  in["kv_indptr"] = Ints32({batch + 1}, indptr);
  in["kv_indices"] = Ints32({indptr.back()}, indices);
  in["kv_last_page_len"] = Ints32({batch}, last);
  std::vector<int64_t> qo{0};
  for (int64_t b = 0; b < batch; ++b)
    qo.push_back(qo.back() + (c.qo_lens.empty() ? 1 : c.qo_lens[static_cast<size_t>(b)]));
  const int64_t nnz_q = qo.back();
  if (!c.qo_lens.empty()) in["qo_indptr"] = Ints32({batch + 1}, qo);
  in["q"] = Random(c.dtype, {nnz_q, c.hq, c.d}, rng);
  if (ragged) {
    std::vector<int64_t> kv{0};
    for (int64_t l : c.kv_lens) kv.push_back(kv.back() + l);
    HostTensor k{c.dtype, {kv.back(), c.hkv, c.d}, {}}, v = k;
    const int64_t row = c.hkv * c.d;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < c.kv_lens[static_cast<size_t>(b)]; ++j) {
        const int64_t page =
            indices[static_cast<size_t>(indptr[static_cast<size_t>(b)] + j / c.page_size)];
        const auto at = static_cast<size_t>((page * c.page_size + j % c.page_size) * row);
        k.values.insert(k.values.end(), in["k_cache"].values.begin() + static_cast<long>(at),
                        in["k_cache"].values.begin() + static_cast<long>(at) + row);
        v.values.insert(v.values.end(), in["v_cache"].values.begin() + static_cast<long>(at),
                        in["v_cache"].values.begin() + static_cast<long>(at) + row);
      }
    (*ragged)["q"] = in["q"];
    (*ragged)["qo_indptr"] = Ints32({batch + 1}, qo);
    (*ragged)["k"] = std::move(k);
    (*ragged)["v"] = std::move(v);
    (*ragged)["kv_indptr"] = Ints32({batch + 1}, kv);
  }
  return in;
}

// Only the inputs of a prefill_ragged / decode call among `in`.
inline HostTensors Without(HostTensors in, const std::vector<std::string>& names) {
  for (const auto& n : names) in.erase(n);
  return in;
}

// Decode, and a causal paged prefill of one row per request, of c's
// inputs (c.qo_lens all 1) through run(op, inputs, attrs): equal results.
template <typename Run>
auto DecodeAndOneRowPrefill(const AttnCase& c, Run run) {
  const HostTensors in = MakePaged(c);
  auto prefill = run("batch_prefill_paged", in, AttrMap{{"causal", true}});
  auto decode = run("batch_decode_paged", Without(in, {"qo_indptr"}), AttrMap{});
  return std::make_pair(std::move(decode), std::move(prefill));
}

// (num_qo_heads, num_kv_heads) pairs: GQA groups and MQA.
using HeadPairs = std::vector<std::pair<int64_t, int64_t>>;

// `base` over dtypes x heads x head_dim 64, 128, 256, in that order; seed
// (when given) picks each case's seed.
inline std::vector<AttnCase> HeadSweep(const AttnCase& base, const std::vector<DType>& dtypes,
                                       const HeadPairs& heads,
                                       const std::function<uint64_t(const AttnCase&)>& seed = {}) {
  std::vector<AttnCase> out;
  for (DType dt : dtypes)
    for (auto [hq, hkv] : heads)
      for (int64_t d : {64, 128, 256}) {
        AttnCase c = base;
        c.dtype = dt;
        c.hq = hq;
        c.hkv = hkv;
        c.d = d;
        if (seed) c.seed = seed(c);
        out.push_back(c);
      }
  return out;
}

// Tails of a decode: kv_len 1, page_size -+ 1, an empty cache, several pages.
inline const std::vector<int64_t>& DecodeTailLens() {
  static const std::vector<int64_t> v = {1, 15, 17, 0, 40};
  return v;
}

// An append of entries (batch_indices[i], positions[i]) into the paged
// cache of `cache` (its k_cache, v_cache and index arrays), random keys and
// values of c's dtype and heads.
inline HostTensors AppendInputs(const AttnCase& c, const HostTensors& cache,
                                const std::vector<int64_t>& batch_indices,
                                const std::vector<int64_t>& positions, std::mt19937_64& rng) {
  const auto n = static_cast<int64_t>(positions.size());
  HostTensors in = {{"append_key", Random(c.dtype, {n, c.hkv, c.d}, rng)},
                    {"append_value", Random(c.dtype, {n, c.hkv, c.d}, rng)},
                    {"batch_indices", Ints32({n}, batch_indices)},
                    {"positions", Ints32({n}, positions)}};
  for (const char* name : {"k_cache", "v_cache", "kv_indices", "kv_indptr", "kv_last_page_len"})
    in[name] = cache.at(name);
  return in;
}

// merge_state's inputs: two random partial states of [rows, heads, 128];
// lse in [-5, 5).
inline HostTensors MergeInputs(DType dt, int64_t rows, int64_t heads, std::mt19937_64& rng) {
  return {{"v_a", Random(dt, {rows, heads, 128}, rng)},
          {"s_a", Random(DType::kFloat32, {rows, heads}, rng, -5, 5)},
          {"v_b", Random(dt, {rows, heads, 128}, rng)},
          {"s_b", Random(DType::kFloat32, {rows, heads}, rng, -5, 5)}};
}

// ----- hostile indices -------------------------------------------------------

// One edit of a good input (in[name].values[i] = v) and the message every
// backend must refuse it with.
struct HostileEdit {
  const char* what;
  const char* name;
  size_t i;
  double v;
  std::string message;
};

// kv_lens {5, 20, 0}, page 16: indptr {0, 1, 3, 3}, last {5, 4, 0}, 3 spare
// pages; qo_lens {2, 3, 1}: qo_indptr {0, 2, 5, 6}.
inline AttnCase HostileCase() {
  AttnCase c;
  c.kv_lens = {5, 20, 0};
  c.qo_lens = {2, 3, 1};
  return c;
}

// The good inputs each op's hostile edits start from.
struct HostileInputs {
  HostTensors decode, prefill, ragged, append;
};

inline HostileInputs MakeHostileInputs() {
  HostileInputs h;
  AttnCase c = HostileCase();
  h.prefill = MakePaged(c, &h.ragged);  // ragged kv_indptr {0, 5, 25, 25} over 25 rows of k
  c.qo_lens.clear();
  h.decode = MakePaged(c);
  std::mt19937_64 rng(3);
  h.append = AppendInputs(c, h.decode, {0, 1}, {4, 19}, rng);
  return h;
}

// The edits of a paged cache's arrays (decode, paged prefill, append).
inline std::vector<HostileEdit> PagedHostileEdits(const std::string& op) {
  return {
      {"negative start", "kv_indptr", 0, -1, op + ": request 0: 'kv_indptr'[0] = -1 is negative"},
      {"decreasing", "kv_indptr", 2, 0,
       op + ": request 1: 'kv_indptr'[2] = 0 is less than 'kv_indptr'[1] = 1 (an indptr never "
            "decreases)"},
      {"beyond indices", "kv_indptr", 3, 4,
       op + ": request 2: 'kv_indptr'[3] = 4 is beyond the 3 entries of 'kv_indices'"},
      {"page out of range", "kv_indices", 2, 6,
       op + ": request 1: 'kv_indices'[2] = 6 (its page 1) is not a page in [0, max_pages=6)"},
      {"negative page", "kv_indices", 0, -3,
       op + ": request 0: 'kv_indices'[0] = -3 (its page 0) is not a page in [0, max_pages=6)"},
      {"huge page", "kv_indices", 1, 2147483647,
       op + ": request 1: 'kv_indices'[1] = 2147483647 (its page 0) is not a page in [0, "
            "max_pages=6)"},
      {"last page over page_size", "kv_last_page_len", 1, 17,
       op + ": request 1: 'kv_last_page_len'[1] = 17 is not in [1, page_size=16]"},
      {"last page empty", "kv_last_page_len", 0, 0,
       op + ": request 0: 'kv_last_page_len'[0] = 0 is not in [1, page_size=16]"},
  };
}

// Every hostile edit of op's HostileInputs, with its message.
inline std::vector<HostileEdit> HostileEdits(const std::string& op) {
  if (op == "batch_prefill_ragged")
    return {
        {"kv start", "kv_indptr", 0, 2, op + ": request 0: 'kv_indptr'[0] = 2, expected 0"},
        {"kv decreasing", "kv_indptr", 2, 4,
         op + ": request 1: 'kv_indptr'[2] = 4 is less than 'kv_indptr'[1] = 5 (an indptr never "
              "decreases)"},
        {"kv beyond k", "kv_indptr", 2, 26,
         op + ": request 1: 'kv_indptr'[2] = 26 is beyond the 25 rows of 'k'"},
        {"kv short of k", "kv_indptr", 3, 24,
         op + ": request 2: 'kv_indptr'[3] = 24 is less than 'kv_indptr'[2] = 25 (an indptr "
              "never decreases)"},
        {"qo beyond q", "qo_indptr", 1, 100,
         op + ": request 0: 'qo_indptr'[1] = 100 is beyond the 6 rows of 'q'"}};
  std::vector<HostileEdit> edits = PagedHostileEdits(op);
  if (op == "batch_prefill_paged")
    edits.insert(
        edits.end(),
        {{"qo start", "qo_indptr", 0, 1, op + ": request 0: 'qo_indptr'[0] = 1, expected 0"},
         {"qo decreasing", "qo_indptr", 2, 1,
          op + ": request 1: 'qo_indptr'[2] = 1 is less than 'qo_indptr'[1] = 2 (an indptr never "
               "decreases)"},
         {"qo beyond q", "qo_indptr", 3, 7,
          op + ": request 2: 'qo_indptr'[3] = 7 is beyond the 6 rows of 'q'"},
         {"qo short of q", "qo_indptr", 3, 5,
          op + ": 'qo_indptr'[3] = 5, expected 6 (the rows of 'q')"}});
  if (op == "append_paged_kv_cache")
    edits.insert(edits.end(),
                 {{"batch index", "batch_indices", 1, 3,
                   op + ": entry 1: 'batch_indices'[1] = 3 is not a request in [0, batch=3)"},
                  {"negative batch index", "batch_indices", 0, -1,
                   op + ": entry 0: 'batch_indices'[0] = -1 is not a request in [0, batch=3)"},
                  {"position past kv_len", "positions", 0, 5,
                   op + ": entry 0 (request 0): 'positions'[0] = 5 is not in [0, kv_len=5) of "
                        "the request's pages"},
                  {"negative position", "positions", 1, -1,
                   op + ": entry 1 (request 1): 'positions'[1] = -1 is not in [0, kv_len=20) of "
                        "the request's pages"},
                  {"request without pages", "batch_indices", 1, 2,
                   op + ": entry 1 (request 2): 'positions'[1] = 19 is not in [0, kv_len=0) of "
                        "the request's pages"}});
  return edits;
}

// op's good hostile inputs with edit e applied.
inline HostTensors Edited(HostTensors in, const HostileEdit& e) {
  in[e.name].values[e.i] = e.v;
  return in;
}

// The ops with hostile edits, each with its good inputs and attrs.
struct HostileOp {
  std::string op;
  const HostTensors* good;
  AttrMap attrs;
};

inline std::vector<HostileOp> HostileOps(const HostileInputs& h) {
  return {{"batch_decode_paged", &h.decode, {}},
          {"batch_prefill_paged", &h.prefill, {{"causal", true}}},
          {"batch_prefill_ragged", &h.ragged, {}},
          {"append_paged_kv_cache", &h.append, {}}};
}

}  // namespace kerneld::testing
