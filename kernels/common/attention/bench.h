// kernel_bench shapes of the attention ops, at issue 33's measure points:
// H_q / H_kv = 32 / 8, head_dim 128, page 16. A bench problem (rows,
// hidden) is (batch, kv_len) for decode, (batch, qo_len = kv_len) for
// prefill, (batch, tokens appended per request) for the append and
// (rows, heads * head_dim) for merge_state. Problems whose caches would not
// fit a GPU's memory give no shapes (kernel_bench skips them).
//
// kernel_bench draws the index arrays from the schemas' InputGen
// (kerneld/input_gen.h): each request gets its share of the pages, and a
// last page of 1 to 16 keys, so a request's kv_len is up to 15 short of
// the problem's. The hooks below count from the arrays drawn: decode's
// bytes are those of the slots its requests hold, prefill's FLOPs those of
// the keys each row sees.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/attention/indices.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld::attention {

inline constexpr int64_t kBenchHq = 32, kBenchHkv = 8, kBenchD = 128, kBenchPage = 16;

// The paged cache of `batch` requests of kv_len keys each, every request on
// its own pages.
inline void BenchCache(int64_t batch, int64_t kv_len, std::map<std::string, Shape>* s) {
  const int64_t pages_per = (kv_len + kBenchPage - 1) / kBenchPage;
  const Shape cache = {batch * pages_per, kBenchPage, kBenchHkv, kBenchD};
  (*s)["k_cache"] = cache;
  (*s)["v_cache"] = cache;
  (*s)["kv_indptr"] = {batch + 1};
  (*s)["kv_indices"] = {batch * pages_per};
  (*s)["kv_last_page_len"] = {batch};
}

// A problem's name: the prefix, then each (letter, value) pair.
inline std::string BenchName(const char* a, int64_t x, const char* b, int64_t y) {
  std::string s(a);
  s += std::to_string(x);
  s += b;
  s += std::to_string(y);
  return s;
}

inline std::vector<int32_t> BenchInts(const BenchProblem& p, const char* name) {
  std::vector<int32_t> v;
  if (auto it = p.index.find(name); it != p.index.end())
    for (double x : it->second.values) v.push_back(static_cast<int32_t>(x));
  return v;
}

// Each request's keys: from the paged arrays, or a ragged kv_indptr.
inline std::vector<int64_t> BenchKvLens(const BenchProblem& p) {
  const std::vector<int32_t> indptr = BenchInts(p, "kv_indptr");
  const std::vector<int32_t> last = BenchInts(p, "kv_last_page_len");
  std::vector<int64_t> lens;
  for (size_t b = 0; b + 1 < indptr.size(); ++b) {
    if (p.shapes.count("k_cache") == 0) {
      lens.push_back(int64_t{indptr[b + 1]} - indptr[b]);
      continue;
    }
    const PagedIndex idx{indptr.data(), nullptr, last.data(), 0, 0, 0, p.shapes.at("k_cache")[1]};
    lens.push_back(PagedKvLen(idx, static_cast<int64_t>(b)));
  }
  return lens;
}

// The bytes a decode must move: q, o and lse, the index arrays, and the
// keys and values of the slots its requests hold.
inline double DecodeBytes(const BenchProblem& p) {
  const Shape& q = p.shapes.at("q");
  const auto item = static_cast<double>(ItemSize(p.dtype));
  double bytes =
      2.0 * static_cast<double>(Numel(q)) * item + 4.0 * static_cast<double>(q[0] * q[1]);
  for (const char* n : {"kv_indptr", "kv_indices", "kv_last_page_len"})
    bytes += 4.0 * static_cast<double>(Numel(p.shapes.at(n)));
  const Shape& kc = p.shapes.at("k_cache");
  for (int64_t len : BenchKvLens(p)) bytes += 2.0 * static_cast<double>(len * kc[2] * kc[3]) * item;
  return bytes;
}

// 4 * head_dim FLOPs a query head and key it sees (q . k and p v), over
// every row of every request, causal as the attrs say.
inline double PrefillFlops(const BenchProblem& p) {
  const Shape& q = p.shapes.at("q");
  const std::vector<int32_t> qo = BenchInts(p, "qo_indptr");
  const std::vector<int64_t> kv = BenchKvLens(p);
  const bool is_causal = AttrOr(p.attrs, "causal", false);
  double keys = 0;
  for (size_t b = 0; b < kv.size() && b + 1 < qo.size(); ++b) {
    const int64_t qo_len = int64_t{qo[b + 1]} - qo[b], kv_len = kv[b];
    for (int64_t i = 0; i < qo_len; ++i)
      keys += static_cast<double>(
          is_causal ? std::clamp<int64_t>(i + kv_len - qo_len + 1, 0, kv_len) : kv_len);
  }
  return 4.0 * static_cast<double>(q[1] * q[2]) * keys;
}

inline BenchSpec DecodeBench() {
  BenchSpec b;
  b.shapes = [](int64_t batch, int64_t kv_len) {
    std::map<std::string, Shape> s;
    if (batch * kv_len > int64_t{128} * 32768) return s;  // over 16 GiB of bfloat16 cache
    s["q"] = {batch, kBenchHq, kBenchD};
    BenchCache(batch, kv_len, &s);
    return s;
  };
  for (int64_t batch : {1, 16, 64, 128})
    for (int64_t kv : {512, 2048, 8192, 32768})
      b.extra.push_back({BenchName("b", batch, "kv", kv), batch, kv});
  b.bytes = DecodeBytes;
  return b;
}

inline BenchSpec PrefillBench(bool paged) {
  BenchSpec b;
  b.shapes = [paged](int64_t batch, int64_t len) {
    std::map<std::string, Shape> s;
    if (batch * len > int64_t{8} * 8192) return s;
    s["q"] = {batch * len, kBenchHq, kBenchD};
    s["qo_indptr"] = {batch + 1};
    if (paged) {
      BenchCache(batch, len, &s);
    } else {
      s["k"] = {batch * len, kBenchHkv, kBenchD};
      s["v"] = {batch * len, kBenchHkv, kBenchD};
      s["kv_indptr"] = {batch + 1};
    }
    return s;
  };
  b.attrs = {{"causal", true}};
  for (int64_t batch : {1, 8})
    for (int64_t len : {512, 2048, 8192})
      b.extra.push_back({BenchName("b", batch, "len", len), batch, len});
  b.flops = PrefillFlops;
  return b;
}

// The append's entries are drawn in order (batch_indices: entry i of n is
// request i * batch / n) at positions i mod page_size: each request's
// tokens (1 or 16 here) go to distinct slots of its first page, and each
// request owns a page more than its tokens need, so every position is
// inside its pages whatever the last page's length. A decode step of 16
// and 128 requests, and the append of a 16-token prefill of 512 requests
// (8192 entries).
inline BenchSpec AppendBench() {
  BenchSpec b;
  b.shapes = [](int64_t batch, int64_t tokens) {
    std::map<std::string, Shape> s;
    if (batch * tokens > int64_t{64} * 8192 || tokens > kBenchPage) return s;
    s["append_key"] = {batch * tokens, kBenchHkv, kBenchD};
    s["append_value"] = {batch * tokens, kBenchHkv, kBenchD};
    s["batch_indices"] = {batch * tokens};
    s["positions"] = {batch * tokens};
    BenchCache(batch, tokens + kBenchPage, &s);
    return s;
  };
  b.extra = {{"b16step", 16, 1}, {"b128step", 128, 1}, {"b512x16", 512, 16}};
  // The new keys and values read, and written into the caches; the index
  // arrays read.
  b.bytes = [](const BenchProblem& p) {
    double bytes = 0;
    for (const char* n : {"append_key", "append_value"})
      bytes += 2.0 * static_cast<double>(Numel(p.shapes.at(n)) * ItemSize(p.dtype));
    for (const char* n :
         {"batch_indices", "positions", "kv_indptr", "kv_indices", "kv_last_page_len"})
      bytes += 4.0 * static_cast<double>(Numel(p.shapes.at(n)));
    return bytes;
  };
  return b;
}

inline BenchSpec MergeBench() {
  BenchSpec b;
  b.shapes = [](int64_t rows, int64_t hidden) {
    std::map<std::string, Shape> s;
    const int64_t heads = std::max<int64_t>(1, hidden / kBenchD);
    s["v_a"] = {rows, heads, kBenchD};
    s["v_b"] = {rows, heads, kBenchD};
    s["s_a"] = {rows, heads};
    s["s_b"] = {rows, heads};
    return s;
  };
  return b;
}

}  // namespace kerneld::attention
