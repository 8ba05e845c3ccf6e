// gemm decode kernel, pipelined through shared memory: float16 / bfloat16,
// M <= 32, compute capability >= 8.0 (cp.async, ldmatrix, mma.sync
// m16n8k16 with float32 accumulation).
//
// With few rows in a, c = a @ b is a stream over b, so the kernel is built
// around keeping DRAM busy:
//  - a block owns TN columns of c and a range of K (all of it unless the
//    column tiles alone cannot fill the GPU; then K is split over grid.y and
//    the splits' float32 partials are summed in split order afterwards);
//  - it walks its K range in chunks of KC: each chunk of b ([TN, KC] of a
//    [N, K] b, or [KC, TN] of a [K, N] b) and of a ([rows, KC]) goes global
//    -> shared with cp.async into one of STAGES slots, so STAGES - 1 chunks
//    are in flight while one is computed. Every row segment a warp copies is
//    contiguous in global memory (whole DRAM bursts, no register staging,
//    no per-lane scattered 16-byte loads);
//  - fragments come from shared memory with ldmatrix (.trans for [K, N]);
//    rows are padded by 16 bytes so the eight rows of one ldmatrix phase
//    fall in distinct banks;
//  - the 8 warps split each chunk's k16 steps; at the end their partial sums
//    are added in warp order in shared memory (deterministic results).
// Requirements (the dispatch checks them and otherwise picks the
// register-window kernel in gemm_decode_mma.cu): a and b 16-byte aligned,
// K % 8 == 0, and N % 8 == 0 for a [K, N] b, so that every 16-byte piece
// is either wholly inside the matrix or wholly outside (zero-filled).
//
// Device code only, and of kerneld's headers only common/cuda/mma.cuh (the
// cp.async / ldmatrix / mma.sync wrappers, device code too), so
// bench/labs/gemm_decode_lab.cu can time variants of it on their own.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/cuda/mma.cuh"

namespace kerneld::cuda::decode_pipe {

inline constexpr int kWarps = 8;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kPadElems = 8;  // 16 bytes of padding per shared-memory row

// Shared-memory geometry of one pipeline slot, in 16-bit elements.
template <bool kTransB, int ROWS, int TN, int KC>
struct Geometry {
  static constexpr int kAPitch = KC + kPadElems;
  static constexpr int kAElems = ROWS * kAPitch;
  static constexpr int kBPitch = kTransB ? KC + kPadElems : TN + kPadElems;
  static constexpr int kBElems = kTransB ? TN * kBPitch : KC * kBPitch;
  static constexpr int kSlotElems = kAElems + kBElems;
};

// Dynamic shared memory the kernel needs: the pipeline, or the epilogue's
// per-warp partial sums and the block's sums where that is larger.
template <bool kTransB, int MT16, int TN, int KC, int STAGES>
constexpr int SmemBytes() {
  constexpr int pipe = STAGES * Geometry<kTransB, 16 * MT16, TN, KC>::kSlotElems * 2;
  constexpr int red = (kWarps + 1) * 16 * MT16 * TN * 4;
  return pipe > red ? pipe : red;
}

// Largest split of K the cluster path takes (the portable cluster size;
// the launcher uses 2).
inline constexpr int kMaxClusterSplits = 8;

namespace detail {

template <typename T>
__device__ __forceinline__ T RoundTo(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return __float2half_rn(v);
  }
}

}  // namespace detail

// c[m_total, n_total] = alpha * a[m_total, k_total] @ b (b [N, K] when
// kTransB, else [K, N]). Each of the grid.y splits covers `chunks_per_split`
// chunks of KC along K; with more than one split, either
//  - `partial` is set: each split writes its float32 sums to
//    partial[blockIdx.y] for a second kernel to add, or
//  - `cluster_splits` (compute capability >= 9.0, launched with cluster
//    dims (1, grid.y, 1), grid.y <= kMaxClusterSplits): the splits of one
//    column tile form a cluster, and its first block adds the others' sums
//    straight from their shared memory, in split order. No workspace, no
//    second launch, the same bits as the partial path.
template <typename T, int MT16, bool kTransB, int TN, int KC, int STAGES>
__global__ void __launch_bounds__(kThreads)
    DecodePipeKernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b,
                     T* __restrict__ c, float* __restrict__ partial, int m_total, int64_t n_total,
                     int64_t k_total, int chunks_per_split, float alpha, bool cluster_splits) {
  static_assert(KC % (16 * kWarps) == 0, "every warp takes whole k16 steps of a chunk");
  static_assert(TN % 16 == 0, "ldmatrix.x4 reads B for two n8 tiles");
  static_assert(STAGES >= 2, "a pipeline needs two slots");
  using G = Geometry<kTransB, 16 * MT16, TN, KC>;
  constexpr int ROWS = 16 * MT16;
  constexpr int NT = TN / 8;            // n8 tiles per block
  constexpr int KS = KC / 16 / kWarps;  // k16 steps per warp per chunk
  constexpr int PIECES_A = KC / 8;      // 16-byte pieces per row of a's chunk
  constexpr int PIECES_B = kTransB ? KC / 8 : TN / 8;
  constexpr int ROWS_B = kTransB ? TN : KC;

  extern __shared__ uint4 smem_raw[];
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5, lane = tid & 31;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * TN;
  const int64_t chunks = (k_total + KC - 1) / KC;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.y) * chunks_per_split;
  const int64_t c_end = c_begin + chunks_per_split < chunks ? c_begin + chunks_per_split : chunks;
  const int nch = c_end > c_begin ? static_cast<int>(c_end - c_begin) : 0;
  const int m_rows = m_total < ROWS ? m_total : ROWS;

  // Rows of a past M are zeros in every slot; cp.async never writes them.
  for (int i = tid; i < STAGES * (ROWS - m_rows) * (G::kAPitch / 8); i += kThreads) {
    const int per_slot = (ROWS - m_rows) * (G::kAPitch / 8);
    const int s = i / per_slot, r = i - s * per_slot;
    uint16_t* row0 = smem + s * G::kSlotElems + m_rows * G::kAPitch;
    reinterpret_cast<uint4*>(row0)[r] = make_uint4(0, 0, 0, 0);
  }

  auto load_chunk = [&](int slot, int64_t chunk) {
    uint16_t* a_s = smem + slot * G::kSlotElems;
    uint16_t* b_s = a_s + G::kAElems;
    const int64_t k0 = chunk * KC;
    for (int i = tid; i < m_rows * PIECES_A; i += kThreads) {
      const int r = i / PIECES_A, p = i - r * PIECES_A;
      const int64_t k = k0 + 8 * p;
      const bool ok = k < k_total;
      // !ok zero-fills; the address is not read but stays a valid one anyway.
      mma::CpAsync16Bytes(a_s + r * G::kAPitch + 8 * p, ok ? a + r * k_total + k : a, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = tid; i < ROWS_B * PIECES_B; i += kThreads) {
      const int r = i / PIECES_B, p = i - r * PIECES_B;
      bool ok;
      const uint16_t* src;
      if constexpr (kTransB) {
        const int64_t n = n0 + r, k = k0 + 8 * p;
        ok = n < n_total && k < k_total;
        src = b + n * k_total + k;
      } else {
        const int64_t k = k0 + r, n = n0 + 8 * p;
        ok = k < k_total && n < n_total;
        src = b + k * n_total + n;
      }
      mma::CpAsync16Bytes(b_s + r * G::kBPitch + 8 * p, ok ? src : b, ok ? 16 : 0);
    }
  };

  float acc[MT16][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT16; ++mt)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.0f;

  auto compute_chunk = [&](int slot) {
    const uint16_t* a_s = smem + slot * G::kSlotElems;
    const uint16_t* b_s = a_s + G::kAElems;
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const int kk = 16 * (warp + kWarps * s);
      uint32_t af[MT16][4];
#pragma unroll
      for (int mt = 0; mt < MT16; ++mt) {
        // Matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
        const int row = mt * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
        mma::Ldsm4<false>(af[mt], a_s + row * G::kAPitch + kk + 8 * (lane >> 4));
      }
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        // b0, b1 of n8 tile j, then of tile j + 1.
        uint32_t bf[4];
        if constexpr (kTransB) {
          const int n = 8 * j + (lane & 7) + 8 * (lane >> 4);
          mma::Ldsm4<false>(bf, b_s + n * G::kBPitch + kk + 8 * ((lane >> 3) & 1));
        } else {
          const int k = kk + (lane & 7) + 8 * ((lane >> 3) & 1);
          mma::Ldsm4<true>(bf, b_s + k * G::kBPitch + 8 * j + 8 * (lane >> 4));
        }
#pragma unroll
        for (int mt = 0; mt < MT16; ++mt) {
          mma::Mma<T>(acc[mt][j], af[mt], bf[0], bf[1]);
          mma::Mma<T>(acc[mt][j + 1], af[mt], bf[2], bf[3]);
        }
      }
    }
  };

  // The pipeline: STAGES - 1 chunks in flight ahead of the one computed.
  // Every iteration commits one group (empty past the end) so that
  // wait_group<STAGES - 2> always means "the chunk about to be computed
  // has landed".
  //
  // With b [N, K] each block walks its chunks starting at its own offset
  // (blockIdx.x mod chunks): every block reads all of a, and in lockstep
  // they would all ask the same L2 lines for the same chunk of a at once;
  // staggered, those reads spread over the L2 slices (16 x 4096 x 4096 bf16
  // on the H100: 18.5 -> 17.0 us). With b [K, N] the blocks keep the same
  // order: in lockstep their 64-byte column pieces of one chunk make up
  // whole rows of b, which DRAM serves far better than scattered pieces
  // (staggered: 19.6 -> 20.2 us, and 16.6 -> 19.2 us at M = 1).
  const int rot =
      kTransB && nch > 0 ? static_cast<int>(blockIdx.x % static_cast<unsigned>(nch)) : 0;
  auto chunk_at = [&](int i) { return c_begin + (i + rot < nch ? i + rot : i + rot - nch); };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nch) load_chunk(s, chunk_at(s));
    mma::CpAsyncCommit();
  }
  for (int i = 0; i < nch; ++i) {
    mma::CpAsyncWait<STAGES - 2>();
    __syncthreads();  // the chunk is visible to all; slot (i - 1) % STAGES is free again
    const int next = i + STAGES - 1;
    if (next < nch) load_chunk(next % STAGES, chunk_at(next));
    mma::CpAsyncCommit();
    compute_chunk(i % STAGES);
  }
  mma::CpAsyncWait<0>();
  __syncthreads();

  // Per-warp sums into shared memory, then added in warp order.
  float* red = reinterpret_cast<float*>(smem_raw);  // [kWarps][ROWS][TN]
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT16; ++mt)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // Accumulator e: row g (+8 for e >= 2), column 2t (+1 for odd e).
        const int m = mt * 16 + g + 8 * (e >> 1);
        const int col = 8 * j + 2 * t + (e & 1);
        red[(warp * ROWS + m) * TN + col] = acc[mt][j][e];
      }
  __syncthreads();
  if (cluster_splits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    float* sums = red + kWarps * ROWS * TN;  // [ROWS][TN], this block's
    for (int i = tid; i < m_rows * TN; i += kThreads) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[w * ROWS * TN + i];
      sums[i] = sum;
    }
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();  // every split's sums are in its shared memory
    if (cluster.block_rank() == 0) {
      const unsigned ranks = cluster.num_blocks();
      for (int i = tid; i < m_rows * TN; i += kThreads) {
        const int m = i / TN, col = i - m * TN;
        const int64_t n = n0 + col;
        if (n >= n_total) continue;
        float sum = 0.0f;
        for (unsigned r = 0; r < ranks; ++r) sum += cluster.map_shared_rank(sums, r)[i];
        c[m * n_total + n] = detail::RoundTo<T>(alpha * sum);
      }
    }
    cluster.sync();  // the other blocks' shared memory stays until it is read
#else
    __trap();  // the launcher asks for clusters from compute capability 9.0 only
#endif
    return;
  }
  for (int i = tid; i < m_rows * TN; i += kThreads) {
    const int m = i / TN, col = i - m * TN;
    const int64_t n = n0 + col;
    if (n >= n_total) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += red[(w * ROWS + m) * TN + col];
    const int64_t at = m * n_total + n;
    if (partial == nullptr)
      c[at] = detail::RoundTo<T>(alpha * sum);
    else
      partial[static_cast<int64_t>(blockIdx.y) * m_total * n_total + at] = sum;
  }
}

}  // namespace kerneld::cuda::decode_pipe
