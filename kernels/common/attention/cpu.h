// The CPU attention of batch_decode_paged, batch_prefill_paged and
// batch_prefill_ragged: per (request, kv head), the request's keys and
// values widened to float32 once, then for each of its query rows and each
// query head of the group: scores in float32, softmax, the weighted sum,
// rounded once to q's dtype. (request, kv head) pairs run in parallel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/cpu/convert.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

struct AttnProblem {
  int64_t batch = 0, hq = 0, hkv = 1, d = 0;
  std::vector<int64_t> qo_start, qo_len, kv_len;
  bool causal = false;
  float scale = 1, cap = 0;
};

// token(b, j): the row of k / v (of hkv * d elements) holding request b's
// key j; the caller has checked every index it can return.
template <typename T, typename TokenFn>
void AttendCpu(ThreadPool* pool, const AttnProblem& p, const T* q, const T* k, const T* v,
               TokenFn token, T* o, float* lse) {
  const int64_t group = p.hq / p.hkv, d = p.d;
  ParallelFor(pool, p.batch * p.hkv, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> kf, vf, qf(static_cast<size_t>(d)), acc(static_cast<size_t>(d)), s;
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t b = task / p.hkv, hk = task % p.hkv;
      const auto ub = static_cast<size_t>(b);
      const int64_t kv_len = p.kv_len[ub], qo_len = p.qo_len[ub];
      kf.resize(static_cast<size_t>(kv_len * d));
      vf.resize(static_cast<size_t>(kv_len * d));
      for (int64_t j = 0; j < kv_len; ++j) {
        const int64_t row = (token(b, j) * p.hkv + hk) * d;
        ToFloat(k + row, kf.data() + j * d, d);
        ToFloat(v + row, vf.data() + j * d, d);
      }
      for (int64_t i = 0; i < qo_len; ++i) {
        const int64_t t = p.qo_start[ub] + i;
        const int64_t seen =
            p.causal ? std::clamp<int64_t>(i + kv_len - qo_len + 1, 0, kv_len) : kv_len;
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          const int64_t at = (t * p.hq + h) * d;
          if (seen == 0) {
            std::fill(acc.begin(), acc.end(), 0.0f);
            FromFloat(acc.data(), o + at, d);
            lse[t * p.hq + h] = -std::numeric_limits<float>::infinity();
            continue;
          }
          ToFloat(q + at, qf.data(), d);
          s.resize(static_cast<size_t>(seen));
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < seen; ++j) {
            const float* kr = kf.data() + j * d;
            float dot = 0;
            for (int64_t e = 0; e < d; ++e) dot += qf[static_cast<size_t>(e)] * kr[e];
            float x = p.scale * dot;
            if (p.cap > 0) x = p.cap * std::tanh(x / p.cap);
            s[static_cast<size_t>(j)] = x;
            m = std::max(m, x);
          }
          float sum = 0;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t j = 0; j < seen; ++j) {
            const float w = std::exp(s[static_cast<size_t>(j)] - m);
            sum += w;
            const float* vr = vf.data() + j * d;
            for (int64_t e = 0; e < d; ++e) acc[static_cast<size_t>(e)] += w * vr[e];
          }
          const float inv = 1.0f / sum;
          for (float& a : acc) a *= inv;
          FromFloat(acc.data(), o + at, d);
          lse[t * p.hq + h] = m + std::log(sum);
        }
      }
    }
  });
}

}  // namespace kerneld::cpu
