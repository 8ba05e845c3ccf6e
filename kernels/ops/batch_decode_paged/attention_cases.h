// Test inputs of the attention ops, shared by the CPU and GPU tests: paged
// caches whose requests own shuffled pages (with spare pages nobody owns),
// the same keys as a ragged k / v, and query rows per request.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
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

}  // namespace kerneld::testing
