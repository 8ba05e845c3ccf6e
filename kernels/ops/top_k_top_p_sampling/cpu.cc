// top_k_top_p_sampling, CPU: the exact support by sorting, then an inverse-
// CDF draw over it in index order. Mass is summed in double here: the CPU
// backend is the reference the CUDA one is checked against statistically.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/cpu/sampling.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

// Smallest probability in the support: token j is kept when p_j >= it (and
// p_j > 0). `scratch` is reused across rows.
float Threshold(const float* p, int64_t v, int64_t top_k, double top_p, double total,
                std::vector<float>* scratch) {
  float t = 0;
  if (!(top_k > 0 && top_k < v) && top_p >= 1) return t;  // no filter
  scratch->assign(p, p + v);
  auto& s = *scratch;
  int64_t head = v;  // candidates for the top-p cut: the top-k head, or all
  if (top_k > 0 && top_k < v) {
    // The k-th largest value: fewer than k tokens are larger than it.
    std::nth_element(s.begin(), s.begin() + (top_k - 1), s.end(), std::greater<float>());
    t = s[static_cast<size_t>(top_k - 1)];
    head = top_k;
  }
  if (top_p < 1) {
    // Tokens in descending order; the cut keeps a token while the mass of
    // strictly larger tokens is below top_p * total. Only the top-k head
    // matters: a cut below it is overridden by the top-k threshold.
    std::sort(s.begin(), s.begin() + head, std::greater<float>());
    const double want = top_p * total;
    double above = 0;   // mass of tokens strictly larger than s[i]
    double run = 0;     // mass of s[0..i)
    float last = s[0];  // the smallest value kept so far
    for (int64_t i = 0; i < head; ++i) {
      const float x = s[static_cast<size_t>(i)];
      if (i == 0 || x != s[static_cast<size_t>(i - 1)]) above = run;
      if (above >= want) break;
      last = x;
      run += x;
    }
    t = std::max(t, last);
  }
  return t;
}

}  // namespace

Status TopKTopPSampling(KernelContext& ctx) {
  const TensorView& probs = ctx.input("probs");
  TensorView& out = ctx.output("samples");
  const int64_t rows = probs.dim(0), v = probs.dim(1);
  const int64_t top_k = ctx.attr_i("top_k");
  const double top_p = ctx.attr_f("top_p");
  const uint64_t seed = static_cast<uint64_t>(ctx.attr_i("seed"));
  const float* p = probs.ptr<float>();
  int32_t* samples = out.ptr<int32_t>();
  KERNELD_RETURN_IF_ERROR(CheckProbRows("top_k_top_p_sampling", p, rows, v));
  ParallelFor(ctx.pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(v, 1)),
              [&](int64_t b, int64_t e) {
                std::vector<float> scratch;
                for (int64_t r = b; r < e; ++r) {
                  const float* row = p + r * v;
                  double total = 0;
                  for (int64_t i = 0; i < v; ++i) total += row[i];
                  const float t = Threshold(row, v, top_k, top_p, total, &scratch);
                  samples[r] = DrawAbove(row, v, t, seed, static_cast<uint64_t>(r));
                }
              });
  return Status::Ok();
}

KERNELD_IMPL(top_k_top_p_sampling, cpu) {
  op.Impl("cpu", TopKTopPSampling, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
