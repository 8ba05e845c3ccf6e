// Host-side choices of the attention kernels, in plain C++ so that tests
// can assert which kernel a problem takes: the query heads a block shares
// a kv head among, and whether a prefill takes the tiled tensor-core
// kernel (prefill_mma.cuh) or the row kernel (attend.cuh).
#pragma once

#include <cstdint>

namespace kerneld::cuda::attention {

inline constexpr int kMmaWarps = 4;
inline constexpr int kMmaRows = 16 * kMmaWarps;  // M rows (query row x head) a tiled block
inline constexpr int kMmaKeys = 64;              // keys a tile

// G: the widest of 8, 4, 2, 1 that divides the group (a block's heads
// share one kv head).
inline int HeadsPerBlock(int group) {
  for (int g : {8, 4, 2})
    if (group % g == 0) return g;
  return 1;
}

// Whether a prefill of `rows` query rows in `batch` requests (hq heads in
// groups of `group`, head_dim d, at most max_keys keys a request) takes
// the tiled kernel: head_dim 64 or 128, and 16 query rows a request or
// more on average (a tile of kMmaRows / HeadsPerBlock rows is then mostly
// full; shorter requests, decode-like, waste less in the row kernel), and
// a grid and key count that fit its 32-bit arithmetic.
inline bool TiledPrefillTakes(int64_t rows, int64_t batch, int hq, int group, int d,
                              int64_t max_keys) {
  if ((d != 64 && d != 128) || batch <= 0 || rows <= 0 || hq <= 0 || group <= 0) return false;
  if (rows < 16 * batch || max_keys > 2147483647) return false;
  const int pack = HeadsPerBlock(group);
  const int64_t per = kMmaRows / pack;
  return (rows + per - 1) / per + batch <= 2147483647 && hq / pack <= 65535;
}

}  // namespace kerneld::cuda::attention
