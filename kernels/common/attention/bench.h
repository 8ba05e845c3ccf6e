// kernel_bench shapes of the attention ops, at issue 33's measure points:
// H_q / H_kv = 32 / 8, head_dim 128, page 16. A bench problem (rows,
// hidden) is (batch, kv_len) for decode, (batch, qo_len = kv_len) for
// prefill, (batch, tokens appended per request) for the append and
// (rows, heads * head_dim) for merge_state. Problems whose caches would not
// fit a GPU's memory give no shapes (kernel_bench skips them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "kerneld/op.h"

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
      b.extra.push_back({"b" + std::to_string(batch) + "kv" + std::to_string(kv), batch, kv});
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
      b.extra.push_back({"b" + std::to_string(batch) + "len" + std::to_string(len), batch, len});
  return b;
}

inline BenchSpec AppendBench() {
  BenchSpec b;
  b.shapes = [](int64_t batch, int64_t tokens) {
    std::map<std::string, Shape> s;
    if (batch * tokens > int64_t{64} * 8192) return s;
    s["append_key"] = {batch * tokens, kBenchHkv, kBenchD};
    s["append_value"] = {batch * tokens, kBenchHkv, kBenchD};
    s["batch_indices"] = {batch * tokens};
    s["positions"] = {batch * tokens};
    BenchCache(batch, tokens, &s);
    return s;
  };
  b.extra = {{"b16step", 16, 1}, {"b128step", 128, 1}, {"b1len8k", 1, 8192}};
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
