// The float64 references of the attention ops: the same index checks as
// the impls (common/attention/indices.h, so a hostile index is refused
// here too), then softmax(scale * q . k) v per query row in float64,
// rounded once to q's dtype; lse in float32.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/attention/indices.h"
#include "common/attention/schema.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld::attention {

inline std::vector<int32_t> Ints(const HostTensor& t) {
  std::vector<int32_t> v(t.values.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(t.values[i]);
  return v;
}

// Requests of query rows over keys; kv(b, j, h, value) is the d doubles of
// request b's key (or value) j at kv head h.
struct RefProblem {
  int64_t batch = 0, hq = 0, hkv = 1, d = 0;
  std::vector<int64_t> qo_start, qo_len, kv_len;
  std::function<const double*(int64_t b, int64_t j, int64_t h, bool value)> kv;
  bool causal = false;
  double scale = 1, cap = 0;
};

inline void AttendReference(const RefProblem& p, const HostTensor& q, HostTensors* out) {
  HostTensor o{q.dtype, q.shape, std::vector<double>(q.values.size(), 0.0)};
  const int64_t nnz_q = q.shape[0];
  HostTensor lse{
      DType::kFloat32, {nnz_q, p.hq}, std::vector<double>(static_cast<size_t>(nnz_q * p.hq), 0.0)};
  const int64_t group = p.hq / p.hkv;
  std::vector<double> x;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t kv_len = p.kv_len[static_cast<size_t>(b)];
    const int64_t qo_len = p.qo_len[static_cast<size_t>(b)];
    for (int64_t i = 0; i < qo_len; ++i) {
      const int64_t t = p.qo_start[static_cast<size_t>(b)] + i;
      const int64_t seen =
          p.causal ? std::clamp<int64_t>(i + kv_len - qo_len + 1, 0, kv_len) : kv_len;
      for (int64_t h = 0; h < p.hq; ++h) {
        const double* qr = q.values.data() + (t * p.hq + h) * p.d;
        double* orow = o.values.data() + (t * p.hq + h) * p.d;
        double& l = lse.values[static_cast<size_t>(t * p.hq + h)];
        if (seen == 0) {
          l = -std::numeric_limits<double>::infinity();
          continue;
        }
        x.assign(static_cast<size_t>(seen), 0.0);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < seen; ++j) {
          const double* k = p.kv(b, j, h / group, false);
          double dot = 0;
          for (int64_t e = 0; e < p.d; ++e) dot += qr[e] * k[e];
          double s = p.scale * dot;
          if (p.cap > 0) s = p.cap * std::tanh(s / p.cap);
          x[static_cast<size_t>(j)] = s;
          m = std::max(m, s);
        }
        double sum = 0;
        for (double& s : x) sum += (s = std::exp(s - m));
        for (int64_t j = 0; j < seen; ++j) {
          const double* v = p.kv(b, j, h / group, true);
          const double w = x[static_cast<size_t>(j)] / sum;
          for (int64_t e = 0; e < p.d; ++e) orow[e] += w * v[e];
        }
        l = RoundTo(DType::kFloat32, m + std::log(sum));
      }
    }
  }
  for (double& v : o.values) v = RoundTo(q.dtype, v);
  (*out)["o"] = std::move(o);
  (*out)["lse"] = std::move(lse);
}

inline void ScoreAttrs(const AttrMap& attrs, int64_t d, bool causal, RefProblem* p) {
  // Through float, as the kernels see them.
  p->scale = SmScale(AttrOr(attrs, "sm_scale", 0.0), d);
  p->cap = static_cast<float>(AttrOr(attrs, "logits_soft_cap", 0.0));
  p->causal = causal && AttrOr(attrs, "causal", false);
}

// A paged cache's index arrays from `in`, as int32, and the PagedIndex
// over them, checked (CheckPaged).
struct RefPagedIndex {
  std::vector<int32_t> indptr, indices, last;
  PagedIndex idx;
};

inline bool PagedIndexRef(const std::string& op, const HostTensors& in, RefPagedIndex* r,
                          std::string* error) {
  const HostTensor* kc = RefInput(in, "k_cache", op, error);
  const HostTensor* ip = RefInput(in, "kv_indptr", op, error);
  const HostTensor* ix = RefInput(in, "kv_indices", op, error);
  const HostTensor* lp = RefInput(in, "kv_last_page_len", op, error);
  if (!kc || !ip || !ix || !lp) return false;
  if (kc->shape.size() != 4) return *error = op + ": bad k_cache rank", false;
  r->indptr = Ints(*ip);
  r->indices = Ints(*ix);
  r->last = Ints(*lp);
  r->idx = {r->indptr.data(),
            r->indices.data(),
            r->last.data(),
            static_cast<int64_t>(r->last.size()),
            static_cast<int64_t>(r->indices.size()),
            kc->shape[0],
            kc->shape[1]};
  if (Status st = CheckPaged(op, r->idx); !st.ok()) return *error = st.message(), false;
  return true;
}

// The paged cache of `in` as keys of a RefProblem (indices checked).
inline bool PagedRef(const std::string& op, const HostTensors& in, RefProblem* p,
                     std::vector<int64_t>* store, std::string* error) {
  const HostTensor* kc = RefInput(in, "k_cache", op, error);
  const HostTensor* vc = RefInput(in, "v_cache", op, error);
  RefPagedIndex r;
  if (!kc || !vc || !PagedIndexRef(op, in, &r, error)) return false;
  const PagedIndex& idx = r.idx;
  p->batch = idx.batch;
  p->hkv = kc->shape[2];
  p->kv_len.resize(static_cast<size_t>(p->batch));
  for (int64_t b = 0; b < p->batch; ++b) p->kv_len[static_cast<size_t>(b)] = PagedKvLen(idx, b);
  // Each request's (page, slot) as a flat token of the cache.
  store->clear();
  std::vector<int64_t> first(static_cast<size_t>(p->batch) + 1, 0);
  for (int64_t b = 0; b < p->batch; ++b) {
    for (int64_t j = 0; j < p->kv_len[static_cast<size_t>(b)]; ++j)
      store->push_back(int64_t{idx.indices[idx.indptr[b] + j / idx.page_size]} * idx.page_size +
                       j % idx.page_size);
    first[static_cast<size_t>(b) + 1] = static_cast<int64_t>(store->size());
  }
  const int64_t hkv = p->hkv, d = kc->shape[3];
  p->kv = [kc, vc, store, first, hkv, d](int64_t b, int64_t j, int64_t h, bool v) {
    const int64_t tok = (*store)[static_cast<size_t>(first[static_cast<size_t>(b)] + j)];
    return (v ? vc : kc)->values.data() + (tok * hkv + h) * d;
  };
  return true;
}

// qo_indptr as the requests' query rows (checked).
inline bool QoRef(const std::string& op, const HostTensors& in, const HostTensor& q, RefProblem* p,
                  std::string* error) {
  const HostTensor* qi = RefInput(in, "qo_indptr", op, error);
  if (!qi) return false;
  const std::vector<int32_t> qo = Ints(*qi);
  p->batch = static_cast<int64_t>(qo.size()) - 1;
  if (Status st =
          CheckIndptr(op, "qo_indptr", qo.data(), p->batch, q.shape[0], "rows of 'q'", true);
      !st.ok())
    return *error = st.message(), false;
  for (int64_t b = 0; b < p->batch; ++b) {
    p->qo_start.push_back(qo[static_cast<size_t>(b)]);
    p->qo_len.push_back(qo[static_cast<size_t>(b) + 1] - qo[static_cast<size_t>(b)]);
  }
  return true;
}

// Attention over the paged cache of `in`: decode (one query row per
// request) or, with `prefill`, qo_indptr's rows (causal where asked).
inline bool PagedAttendReference(const std::string& op, bool prefill, const HostTensors& in,
                                 const AttrMap& attrs, HostTensors* out, std::string* error) {
  const HostTensor* q = RefInput(in, "q", op, error);
  if (!q) return false;
  RefProblem p;
  std::vector<int64_t> store;
  if (prefill && !QoRef(op, in, *q, &p, error)) return false;
  if (!PagedRef(op, in, &p, &store, error)) return false;
  for (int64_t b = 0; !prefill && b < p.batch; ++b) {
    p.qo_start.push_back(b);
    p.qo_len.push_back(1);
  }
  p.hq = q->shape[1];
  p.d = q->shape[2];
  ScoreAttrs(attrs, p.d, prefill, &p);
  AttendReference(p, *q, out);
  return true;
}

inline bool DecodeReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                            std::string* error) {
  return PagedAttendReference("batch_decode_paged", false, in, attrs, out, error);
}

inline bool PrefillPagedReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                                  std::string* error) {
  return PagedAttendReference("batch_prefill_paged", true, in, attrs, out, error);
}

inline bool PrefillRaggedReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                                   std::string* error) {
  const std::string op = "batch_prefill_ragged";
  const HostTensor* q = RefInput(in, "q", op, error);
  const HostTensor* k = RefInput(in, "k", op, error);
  const HostTensor* v = RefInput(in, "v", op, error);
  const HostTensor* ki = RefInput(in, "kv_indptr", op, error);
  if (!q || !k || !v || !ki) return false;
  RefProblem p;
  if (!QoRef(op, in, *q, &p, error)) return false;
  const std::vector<int32_t> kv = Ints(*ki);
  if (Status st =
          CheckIndptr(op, "kv_indptr", kv.data(), p.batch, k->shape[0], "rows of 'k'", true);
      !st.ok())
    return *error = st.message(), false;
  p.hq = q->shape[1];
  p.d = q->shape[2];
  p.hkv = k->shape[1];
  for (int64_t b = 0; b < p.batch; ++b)
    p.kv_len.push_back(kv[static_cast<size_t>(b) + 1] - kv[static_cast<size_t>(b)]);
  const int64_t hkv = p.hkv, d = p.d;
  p.kv = [k, v, kv, hkv, d](int64_t b, int64_t j, int64_t h, bool val) {
    return (val ? v : k)->values.data() + ((kv[static_cast<size_t>(b)] + j) * hkv + h) * d;
  };
  ScoreAttrs(attrs, p.d, true, &p);
  AttendReference(p, *q, out);
  return true;
}

inline bool AppendReference(const HostTensors& in, const AttrMap&, HostTensors* out,
                            std::string* error) {
  const std::string op = "append_paged_kv_cache";
  const HostTensor* ak = RefInput(in, "append_key", op, error);
  const HostTensor* av = RefInput(in, "append_value", op, error);
  const HostTensor* bi = RefInput(in, "batch_indices", op, error);
  const HostTensor* po = RefInput(in, "positions", op, error);
  const HostTensor* kc = RefInput(in, "k_cache", op, error);
  const HostTensor* vc = RefInput(in, "v_cache", op, error);
  RefPagedIndex r;
  if (!ak || !av || !bi || !po || !kc || !vc || !PagedIndexRef(op, in, &r, error)) return false;
  const PagedIndex& idx = r.idx;
  const std::vector<int32_t> batch = Ints(*bi), pos = Ints(*po);
  if (Status st = CheckAppend(op, idx, batch.data(), pos.data(), static_cast<int64_t>(pos.size()));
      !st.ok())
    return *error = st.message(), false;
  HostTensor k = *kc, v = *vc;
  const int64_t row = kc->shape[2] * kc->shape[3];
  for (size_t i = 0; i < pos.size(); ++i) {
    const int64_t page = idx.indices[idx.indptr[batch[i]] + pos[i] / idx.page_size];
    const int64_t at = (page * idx.page_size + pos[i] % idx.page_size) * row;
    for (int64_t e = 0; e < row; ++e) {
      k.values[static_cast<size_t>(at + e)] =
          RoundTo(k.dtype, ak->values[static_cast<size_t>(static_cast<int64_t>(i) * row + e)]);
      v.values[static_cast<size_t>(at + e)] =
          RoundTo(v.dtype, av->values[static_cast<size_t>(static_cast<int64_t>(i) * row + e)]);
    }
  }
  (*out)["k_cache"] = std::move(k);
  (*out)["v_cache"] = std::move(v);
  return true;
}

// v, s of the union of two disjoint key sets from each one's (v, s).
inline bool MergeReference(const HostTensors& in, const AttrMap&, HostTensors* out,
                           std::string* error) {
  const std::string op = "merge_state";
  const HostTensor* va = RefInput(in, "v_a", op, error);
  const HostTensor* sa = RefInput(in, "s_a", op, error);
  const HostTensor* vb = RefInput(in, "v_b", op, error);
  const HostTensor* sb = RefInput(in, "s_b", op, error);
  if (!va || !sa || !vb || !sb) return false;
  HostTensor v{va->dtype, va->shape, std::vector<double>(va->values.size(), 0.0)};
  HostTensor s{DType::kFloat32, sa->shape, std::vector<double>(sa->values.size(), 0.0)};
  const size_t rows = sa->values.size();
  const size_t d = rows == 0 ? 0 : va->values.size() / rows;
  const double ninf = -std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < rows; ++r) {
    const double a = sa->values[r], b = sb->values[r];
    const double m = std::max(a, b);
    double wa = 0, wb = 0;
    if (m == ninf) {
      s.values[r] = ninf;
    } else {
      wa = std::exp(a - m);
      wb = std::exp(b - m);
      s.values[r] = RoundTo(DType::kFloat32, m + std::log(wa + wb));
      const double sum = wa + wb;
      wa /= sum;
      wb /= sum;
    }
    for (size_t e = 0; e < d; ++e)
      v.values[r * d + e] =
          RoundTo(v.dtype, wa * va->values[r * d + e] + wb * vb->values[r * d + e]);
  }
  (*out)["v"] = std::move(v);
  (*out)["s"] = std::move(s);
  return true;
}

}  // namespace kerneld::attention
