// softmax, CUDA: one block per row, float32 throughout.
//
// Rows up to 16384 elements are cached in registers (up to 32 floats per
// thread): the logits are read from DRAM once, the probabilities written
// once, which is what a memory-bound op needs to run near copy bandwidth.
// Packs are 16 bytes when every row starts 16-byte aligned (vocab a multiple
// of the pack and aligned bases), single elements otherwise (odd vocab such
// as 50257). Longer rows take a two-pass kernel: an online (max, sum) pass,
// then a pass that re-reads the row (an L2 hit) and writes it.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

namespace bo = blockops;

template <typename T, int N>
struct alignas(sizeof(T) * N) SmPack {
  T v[N];
};

// Stores n consecutive floats; 16-byte stores when n is a multiple of 4
// (the pointer is then 16-byte aligned by the caller's plan).
template <int N>
__device__ __forceinline__ void StoreFloats(float* p, const float* v) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int j = 0; j < N; j += 4)
      *reinterpret_cast<float4*>(p + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = v[j];
  }
}

// The row in registers: thread t holds packs t, t + blockDim, ... (coalesced).
constexpr int kRegThreads = 512;  // block size bound of the register-cached kernel

template <typename T, int N, int kItems>
__global__ void __launch_bounds__(kRegThreads)
    SoftmaxRegKernel(const T* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t vocab,
                     float scale) {
  __shared__ float scratch[32];
  const int64_t units = vocab / N;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const SmPack<T, N>* xr = reinterpret_cast<const SmPack<T, N>*>(x + r * vocab);
    float v[kItems][N];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t u = threadIdx.x + int64_t{i} * blockDim.x;
      if (u < units) {
        const SmPack<T, N> p = xr[u];
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] = ToFloat(p.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] = -INFINITY;
      }
#pragma unroll
      for (int j = 0; j < N; ++j) m = fmaxf(m, v[i][j]);
    }
    m = bo::Max(m, -INFINITY, scratch);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t u = threadIdx.x + int64_t{i} * blockDim.x;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[i][j] = u < units ? __expf((v[i][j] - m) * scale) : 0.0f;
        s += v[i][j];
      }
    }
    const float inv = 1.0f / bo::Sum(s, scratch);
    float* yr = y + r * vocab;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t u = threadIdx.x + int64_t{i} * blockDim.x;
      if (u < units) {
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] *= inv;
        StoreFloats<N>(yr + u * N, v[i]);
      }
    }
  }
}

// Merges two online-softmax states (max m, sum s of exp((x - m) * scale)).
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2, float scale) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;  // both empty
  s = s * __expf((m - mm) * scale) + s2 * __expf((m2 - mm) * scale);
  m = mm;
}

// Rows too long for registers: pass 1 keeps an online (max, sum) per thread
// and merges them over the block; pass 2 re-reads and writes.
template <typename T, int N>
__global__ void __launch_bounds__(1024)
    SoftmaxStreamKernel(const T* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t vocab,
                        float scale) {
  __shared__ float sm[32], ss[32];
  const int64_t units = vocab / N;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const SmPack<T, N>* xr = reinterpret_cast<const SmPack<T, N>*>(x + r * vocab);
    float m = -INFINITY, s = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const SmPack<T, N> p = xr[u];
      float v[N];
      float pm = -INFINITY;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[j] = ToFloat(p.v[j]);
        pm = fmaxf(pm, v[j]);
      }
      if (pm == -INFINITY) continue;  // contributes nothing
      if (pm > m) {
        s *= __expf((m - pm) * scale);
        m = pm;
      }
#pragma unroll
      for (int j = 0; j < N; ++j) s += __expf((v[j] - m) * scale);
    }
    // Block merge: butterfly within warps, then warp 0 over the warps.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      Merge(m, s, m2, s2, scale);
    }
    if (lane == 0) sm[warp] = m, ss[warp] = s;
    __syncthreads();
    m = lane < (blockDim.x >> 5) ? sm[lane] : -INFINITY;
    s = lane < (blockDim.x >> 5) ? ss[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      Merge(m, s, m2, s2, scale);
    }
    __syncthreads();
    const float inv = 1.0f / s;
    float* yr = y + r * vocab;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const SmPack<T, N> p = xr[u];
      float v[N];
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = __expf((ToFloat(p.v[j]) - m) * scale) * inv;
      StoreFloats<N>(yr + u * N, v);
    }
  }
}

unsigned RowGrid(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, int64_t{1} << 30));
}

// Threads for a register-cached row of `units` packs, kItems per thread.
template <int kItems>
unsigned ThreadsFor(int64_t units) {
  const int64_t t = (units + kItems - 1) / kItems;
  return static_cast<unsigned>(std::max<int64_t>(32, (t + 31) / 32 * 32));
}

template <typename T, int N, int kItems>
Status LaunchReg(cudaStream_t s, const T* x, float* y, int64_t rows, int64_t vocab, float scale) {
  SoftmaxRegKernel<T, N, kItems>
      <<<RowGrid(rows), ThreadsFor<kItems>(vocab / N), 0, s>>>(x, y, rows, vocab, scale);
  return CheckLaunch("softmax");
}

// Picks the register-cache size: the fewest items per thread that keep the
// block at <= 512 threads (several rows per SM, and up to 128 registers a
// thread for the cache); a row longer than 512 x 32 floats streams.
template <typename T, int N>
Status LaunchRow(cudaStream_t s, const T* x, float* y, int64_t rows, int64_t vocab, float scale) {
  constexpr int kMaxItems = 32 / N;  // at most 32 cached floats per thread
  const int64_t units = vocab / N;
  for (int items = 1; items <= kMaxItems; items *= 2) {
    if ((units + items - 1) / items > kRegThreads) continue;
    switch (items) {
      case 1:
        return LaunchReg<T, N, 1>(s, x, y, rows, vocab, scale);
      case 2:
        return LaunchReg<T, N, 2>(s, x, y, rows, vocab, scale);
      case 4:
        return LaunchReg<T, N, (kMaxItems >= 4 ? 4 : 1)>(s, x, y, rows, vocab, scale);
      case 8:
        return LaunchReg<T, N, (kMaxItems >= 8 ? 8 : 1)>(s, x, y, rows, vocab, scale);
      case 16:
        return LaunchReg<T, N, (kMaxItems >= 16 ? 16 : 1)>(s, x, y, rows, vocab, scale);
      case 32:
        return LaunchReg<T, N, (kMaxItems >= 32 ? 32 : 1)>(s, x, y, rows, vocab, scale);
      default:
        break;
    }
  }
  SoftmaxStreamKernel<T, N><<<RowGrid(rows), 1024, 0, s>>>(x, y, rows, vocab, scale);
  return CheckLaunch("softmax");
}

template <typename T>
Status LaunchSoftmax(const KernelContext& ctx, const TensorView& xv, TensorView& yv, float scale) {
  const int64_t rows = xv.dim(0), vocab = xv.dim(1);
  const T* x = static_cast<const T*>(xv.raw());
  float* y = yv.ptr<float>();
  // Four elements a pack for every dtype: each pack's output is one 16-byte
  // float4 store, so a warp's stores are contiguous. (Eight-element packs of
  // half types made each lane store 32 bytes: every store instruction then
  // covered twice the span with holes, and float16/bfloat16 large rows ran
  // at 0.84-0.86 x copy against float32's 0.98.) Half types read 8 bytes.
  constexpr int kN = 4;
  // Packs need every row of x aligned to a pack and of y to 16 bytes.
  if (vocab % kN == 0 && reinterpret_cast<uintptr_t>(x) % (kN * sizeof(T)) == 0 && IsAligned16(y))
    return LaunchRow<T, kN>(StreamOf(ctx), x, y, rows, vocab, scale);
  return LaunchRow<T, 1>(StreamOf(ctx), x, y, rows, vocab, scale);
}

}  // namespace

Status Softmax(KernelContext& ctx) {
  const TensorView& x = ctx.input("logits");
  TensorView& y = ctx.output("probs");
  if (x.numel() == 0) return Status::Ok();
  const float scale = static_cast<float>(1.0 / ctx.attr_f("temperature"));
  switch (x.dtype) {
    case DType::kFloat16:
      return LaunchSoftmax<__half>(ctx, x, y, scale);
    case DType::kBFloat16:
      return LaunchSoftmax<__nv_bfloat16>(ctx, x, y, scale);
    case DType::kFloat32:
      return LaunchSoftmax<float>(ctx, x, y, scale);
    default:
      return InvalidArgument("softmax: cuda has no " + std::string(DTypeName(x.dtype)) + " kernel");
  }
}

KERNELD_IMPL(softmax, cuda) { op.Impl("cuda", Softmax, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
