// gemm, CPU: c = alpha * a @ b (b^T with transpose_b), float32 accumulation,
// one rounding per output. Operands are widened to float32 once (b laid out
// [K, N]), then each tile of c accumulates over K with a vectorizable inner
// loop over columns.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"
#include "ops/gemm/args.h"

namespace kerneld::cpu {

namespace {

// A tile of c: kTileM rows x kTileN columns of float accumulators (4 KiB,
// L1-resident); the b panel row it reads per k is kTileN floats.
constexpr int64_t kTileM = 8;
constexpr int64_t kTileN = 128;

template <typename T>
void GemmTile(const float* a, const float* b, T* c, int64_t m0, int64_t n0, int64_t m_n,
              int64_t n_n, int64_t k_n, int64_t n_total, float alpha) {
  float acc[kTileM][kTileN] = {};
  for (int64_t k = 0; k < k_n; ++k) {
    const float* brow = b + k * n_total + n0;
    for (int64_t i = 0; i < m_n; ++i) {
      const float av = a[(m0 + i) * k_n + k];
      float* accr = acc[i];
      for (int64_t j = 0; j < n_n; ++j) accr[j] += av * brow[j];
    }
  }
  float out[kTileN];
  for (int64_t i = 0; i < m_n; ++i) {
    for (int64_t j = 0; j < n_n; ++j) out[j] = alpha * acc[i][j];
    FromFloat(out, c + (m0 + i) * n_total + n0, n_n);
  }
}

template <typename T>
Status GemmTyped(KernelContext& ctx) {
  // Named copies, not a structured binding: clang 14 cannot capture those.
  const gemm::GemmArgs<T> args = gemm::GemmArgsOf<T>(ctx);
  const int64_t m = args.m, k = args.k, n = args.n;
  const T *a = args.a, *b = args.b;
  T* c = args.c;
  const bool tb = args.transpose_b;
  const float alpha = args.alpha;
  if (m == 0 || n == 0) return Status::Ok();

  // Widen a (row by row) and b (into [K, N], transposing when needed).
  std::vector<float> af, bf;
  const float* ap = nullptr;
  const float* bp = nullptr;
  if constexpr (std::is_same_v<T, float>) ap = a;
  if (ap == nullptr) {
    af.resize(static_cast<size_t>(m * k));
    ParallelFor(
        ctx.pool, m, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(k, 1)),
        [&](int64_t r0, int64_t r1) { ToFloat(a + r0 * k, af.data() + r0 * k, (r1 - r0) * k); });
    ap = af.data();
  }
  if constexpr (std::is_same_v<T, float>)
    if (!tb) bp = b;
  if (bp == nullptr) {
    bf.resize(static_cast<size_t>(k * n));
    if (!tb) {
      ParallelFor(
          ctx.pool, k, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1)),
          [&](int64_t r0, int64_t r1) { ToFloat(b + r0 * n, bf.data() + r0 * n, (r1 - r0) * n); });
    } else {
      // b is [N, K]: widen each row of b into a buffer, scatter it as a column.
      ParallelFor(ctx.pool, n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(k, 1)),
                  [&](int64_t r0, int64_t r1) {
                    std::vector<float> row(static_cast<size_t>(k));
                    for (int64_t r = r0; r < r1; ++r) {
                      ToFloat(b + r * k, row.data(), k);
                      for (int64_t i = 0; i < k; ++i)
                        bf[static_cast<size_t>(i * n + r)] = row[static_cast<size_t>(i)];
                    }
                  });
    }
    bp = bf.data();
  }

  const int64_t tiles_m = (m + kTileM - 1) / kTileM, tiles_n = (n + kTileN - 1) / kTileN;
  ParallelFor(ctx.pool, tiles_m * tiles_n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m0 = (t / tiles_n) * kTileM, n0 = (t % tiles_n) * kTileN;
      GemmTile(ap, bp, c, m0, n0, std::min(kTileM, m - m0), std::min(kTileN, n - n0), k, n, alpha);
    }
  });
  return Status::Ok();
}

}  // namespace

Status Gemm(KernelContext& ctx) {
  return DispatchFloating(ctx.input("a").dtype, "gemm",
                          [&](auto tag) { return GemmTyped<decltype(tag)>(ctx); });
}

KERNELD_IMPL(gemm, cpu) { op.Impl("cpu", Gemm, Requirements::Cpu(), kPriorityFallback); }

}  // namespace kerneld::cpu
