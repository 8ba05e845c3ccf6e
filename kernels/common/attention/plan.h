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

// The tensor-core decode (decode_mma.cuh): a block's 16 M rows are the
// query heads of one request that share a kv head, so it packs the widest
// divisor of the group up to 16 (a group of 3 packs 3, of 32 packs 16).
inline constexpr int kDecodeKeys = 64;   // keys a tile (each of 4 warps takes 16)
inline constexpr int kDecodeStages = 3;  // tiles in shared memory: two load while one is used
inline constexpr int kDecodeBlocksPerSm = 2;

inline int DecodePack(int group) {
  for (int g = group < 16 ? group : 16; g > 1; --g)
    if (group % g == 0) return g;
  return 1;
}

// Whether batch_decode_paged takes the tensor-core kernel: head_dim 64 or
// 128 (256 stays on the row kernel: its o accumulator would not fit the
// registers) and keys a request that fit its 32-bit arithmetic.
inline bool DecodeMmaTakes(int d, int64_t max_keys) {
  return (d == 64 || d == 128) && max_keys <= 2147483647;
}

// Chunks of each request's keys for the tensor-core decode: enough blocks
// to fill every slot of the device once (batch x kv-head blocks as they
// are when that already fills it), no chunk under 128 keys on average (the
// merge would cost more than it spreads), at most 64.
inline int DecodeMmaChunks(int64_t batch, int64_t head_blocks, int64_t avg_keys, int sm_count) {
  const int64_t blocks = batch * head_blocks;
  const int64_t slots = int64_t{sm_count} * kDecodeBlocksPerSm;
  if (blocks <= 0 || blocks >= slots) return 1;
  int64_t c = slots / blocks;
  const int64_t by_keys = (avg_keys + 127) / 128;
  if (c > by_keys) c = by_keys;
  if (c > 64) c = 64;
  return c < 1 ? 1 : static_cast<int>(c);
}

}  // namespace kerneld::cuda::attention
