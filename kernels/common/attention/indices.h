// The index arrays of the attention ops (FlashInfer's conventions: int32
// indptr / indices / last_page_len over NHD caches), checked on the host
// against the caches' real extents before any kernel reads them. Each
// failure is INVALID_ARGUMENT naming the op, the request and the entry.
// The CPU impls and the float64 references call these on the arrays
// themselves; the CUDA impls detect on the device (common/attention/
// check.cuh) and call these on a host copy to word the message.
#pragma once

#include <cstdint>
#include <string>

#include "kerneld/status.h"

namespace kerneld::attention {

// A paged cache's index arrays, readable here.
struct PagedIndex {
  const int32_t* indptr = nullptr;         // [batch + 1]
  const int32_t* indices = nullptr;        // [nnz_pages]
  const int32_t* last_page_len = nullptr;  // [batch]
  int64_t batch = 0;
  int64_t nnz_pages = 0;
  int64_t max_pages = 0;
  int64_t page_size = 0;
};

// Request b's number of keys; a request without pages has none (its
// last_page_len is not read).
inline int64_t PagedKvLen(const PagedIndex& p, int64_t b) {
  const int64_t pages = int64_t{p.indptr[b + 1]} - p.indptr[b];
  return pages <= 0 ? 0 : (pages - 1) * p.page_size + p.last_page_len[b];
}

inline std::string At(const char* name, int64_t i) {
  return std::string("'") + name + "'[" + std::to_string(i) + "]";
}

// An indptr over `total` entries of what it indexes (`what`). exact: it
// starts at 0 and ends at total (qo_indptr, a ragged kv_indptr); else it
// stays within [0, total] (a paged kv_indptr over kv_indices). Never
// decreasing either way.
inline Status CheckIndptr(const std::string& op, const char* name, const int32_t* indptr,
                          int64_t batch, int64_t total, const std::string& what, bool exact) {
  if (exact ? indptr[0] != 0 : indptr[0] < 0)
    return InvalidArgument(op + ": request 0: " + At(name, 0) + " = " + std::to_string(indptr[0]) +
                           (exact ? ", expected 0" : " is negative"));
  for (int64_t b = 0; b < batch; ++b) {
    if (indptr[b + 1] < indptr[b])
      return InvalidArgument(op + ": request " + std::to_string(b) + ": " + At(name, b + 1) +
                             " = " + std::to_string(indptr[b + 1]) + " is less than " +
                             At(name, b) + " = " + std::to_string(indptr[b]) +
                             " (an indptr never decreases)");
    if (indptr[b + 1] > total)
      return InvalidArgument(op + ": request " + std::to_string(b) + ": " + At(name, b + 1) +
                             " = " + std::to_string(indptr[b + 1]) + " is beyond the " +
                             std::to_string(total) + " " + what);
  }
  if (exact && indptr[batch] != total)
    return InvalidArgument(op + ": " + At(name, batch) + " = " + std::to_string(indptr[batch]) +
                           ", expected " + std::to_string(total) + " (the " + what + ")");
  return Status::Ok();
}

// kv_indptr within kv_indices; each request's pages in [0, max_pages); a
// request with pages has last_page_len in [1, page_size].
inline Status CheckPaged(const std::string& op, const PagedIndex& p) {
  KERNELD_RETURN_IF_ERROR(CheckIndptr(op, "kv_indptr", p.indptr, p.batch, p.nnz_pages,
                                      "entries of 'kv_indices'", false));
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t begin = p.indptr[b], end = p.indptr[b + 1];
    if (end > begin && (p.last_page_len[b] < 1 || p.last_page_len[b] > p.page_size))
      return InvalidArgument(op + ": request " + std::to_string(b) + ": " +
                             At("kv_last_page_len", b) + " = " +
                             std::to_string(p.last_page_len[b]) +
                             " is not in [1, page_size=" + std::to_string(p.page_size) + "]");
    for (int64_t k = begin; k < end; ++k)
      if (p.indices[k] < 0 || p.indices[k] >= p.max_pages)
        return InvalidArgument(
            op + ": request " + std::to_string(b) + ": " + At("kv_indices", k) + " = " +
            std::to_string(p.indices[k]) + " (its page " + std::to_string(k - begin) +
            ") is not a page in [0, max_pages=" + std::to_string(p.max_pages) + ")");
  }
  return Status::Ok();
}

// Entry i of an append goes to request batch_indices[i] at positions[i],
// which must be a slot its pages already hold: [0, kv_len). Call after
// CheckPaged.
inline Status CheckAppend(const std::string& op, const PagedIndex& p, const int32_t* batch_indices,
                          const int32_t* positions, int64_t nnz) {
  for (int64_t i = 0; i < nnz; ++i) {
    const int32_t b = batch_indices[i];
    if (b < 0 || b >= p.batch)
      return InvalidArgument(op + ": entry " + std::to_string(i) + ": " + At("batch_indices", i) +
                             " = " + std::to_string(b) +
                             " is not a request in [0, batch=" + std::to_string(p.batch) + ")");
    const int64_t len = PagedKvLen(p, b);
    if (positions[i] < 0 || positions[i] >= len)
      return InvalidArgument(
          op + ": entry " + std::to_string(i) + " (request " + std::to_string(b) +
          "): " + At("positions", i) + " = " + std::to_string(positions[i]) +
          " is not in [0, kv_len=" + std::to_string(len) + ") of the request's pages");
  }
  return Status::Ok();
}

}  // namespace kerneld::attention
