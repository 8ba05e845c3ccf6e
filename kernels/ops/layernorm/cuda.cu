// layernorm, CUDA: the shape of rmsnorm.cu (a row per block or per warp,
// the row cached in registers, float32 reductions, one rounding) with two
// reductions: the mean, then the variance of the centred cached values,
// which does not cancel the way E[x^2] - mean^2 can.
//
// Half types are bound by occupancy, not by their two reductions: at 56-64
// registers a thread (1024-thread launch bounds) an SM keeps 1024 threads
// and the kernel ran at 0.84 x copy bandwidth on the H100; with rows of up
// to 1024 vectors taken two vectors a thread by blocks of at most 512
// threads bounded to 32 registers (4 blocks, 2048 threads an SM) it runs
// at 0.98 (32768 x 8192) and 0.91-1.0 (4096 x 4096). Pairs convert with one
// instruction (ToFloat2 / FromFloat2), and y = (x - mean) * (rstd * g) + b is one FMA.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/rows.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

// Launch bounds of the two instantiations: any block up to 1024 threads, or
// the full-occupancy one for blocks up to 512 (see the top of the file).
inline constexpr int kOccThreads = 512;
inline constexpr int kOccBlocks = 4;

// y may alias x: not __restrict__ (each thread reads its elements first).
template <typename T, int N, int kItems, int kMaxThreads, int kMinBlocks>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    LayerNormKernel(const T* x, const T* __restrict__ gamma, const T* __restrict__ beta, T* y,
                    int64_t rows, int units, float eps) {
  using P = Pack<T, N>;
  // Pairs of elements where the pack has them (the vector path).
  constexpr int kStep = N % 2 == 0 ? 2 : 1;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units) * N;
  for (int64_t row0 = int64_t{blockIdx.x} * blockDim.y; row0 < rows;
       row0 += int64_t{gridDim.x} * blockDim.y) {
    const int64_t row = row0 + threadIdx.y;
    const bool live = row < rows;
    const int64_t base = live ? row * units : 0;
    const P* xr = reinterpret_cast<const P*>(x) + base;
    P cache[kItems];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        cache[k] = xr[u];
#pragma unroll
        for (int j = 0; j < N; j += kStep) {
          if constexpr (kStep == 2) {
            const float2 f = ToFloat2(&cache[k].v[j]);
            sum += f.x + f.y;
          } else {
            sum += ToFloat(cache[k].v[j]);
          }
        }
      }
    }
    const float mean = RowSum(sum, scratch) / h;
    float dev = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
#pragma unroll
        for (int j = 0; j < N; j += kStep) {
          if constexpr (kStep == 2) {
            const float2 f = ToFloat2(&cache[k].v[j]);
            const float c0 = f.x - mean, c1 = f.y - mean;
            dev = fmaf(c0, c0, fmaf(c1, c1, dev));
          } else {
            const float c = ToFloat(cache[k].v[j]) - mean;
            dev = fmaf(c, c, dev);
          }
        }
      }
    }
    const float rstd = rsqrtf(RowSum(dev, scratch) / h + eps);
    const P* gp = reinterpret_cast<const P*>(gamma);
    const P* bp = reinterpret_cast<const P*>(beta);
    P* yr = reinterpret_cast<P*>(y) + base;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        const P g = gp[u];
        const P b = bp[u];
        P o;
#pragma unroll
        for (int j = 0; j < N; j += kStep) {
          if constexpr (kStep == 2) {
            const float2 xf = ToFloat2(&cache[k].v[j]);
            const float2 gf = ToFloat2(&g.v[j]);
            const float2 bf = ToFloat2(&b.v[j]);
            FromFloat2(make_float2(fmaf(xf.x - mean, rstd * gf.x, bf.x),
                                   fmaf(xf.y - mean, rstd * gf.y, bf.y)),
                       &o.v[j]);
          } else {
            o.v[j] = FromFloat<T>(
                fmaf(ToFloat(cache[k].v[j]) - mean, rstd * ToFloat(g.v[j]), ToFloat(b.v[j])));
          }
        }
        yr[u] = o;
      }
    }
  }
}

// Rows too wide for the register cache: three passes over the row (mean,
// variance, output), the later ones mostly from L2.
template <typename T, int N>
__global__ void __launch_bounds__(1024)
    LayerNormWideKernel(const T* x, const T* __restrict__ gamma, const T* __restrict__ beta, T* y,
                        int64_t rows, int64_t units, float eps) {
  using P = Pack<T, N>;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units * N);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x) + row * units;
    float sum = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) sum += ToFloat(v.v[j]);
    }
    const float mean = RowSum(sum, scratch) / h;
    float dev = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float c = ToFloat(v.v[j]) - mean;
        dev += c * c;
      }
    }
    const float rstd = rsqrtf(RowSum(dev, scratch) / h + eps);
    const P* gp = reinterpret_cast<const P*>(gamma);
    const P* bp = reinterpret_cast<const P*>(beta);
    P* yr = reinterpret_cast<P*>(y) + row * units;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
      const P g = gp[u];
      const P b = bp[u];
      P o;
#pragma unroll
      for (int j = 0; j < N; ++j)
        o.v[j] = FromFloat<T>((ToFloat(v.v[j]) - mean) * rstd * ToFloat(g.v[j]) + ToFloat(b.v[j]));
      yr[u] = o;
    }
  }
}

template <typename T, int N>
Status Launch(const KernelContext& ctx, const T* x, const T* g, const T* b, T* y, int64_t rows,
              int64_t h, float eps) {
  const int64_t units = h / N;
  cudaStream_t s = StreamOf(ctx);
  // Half-type vector rows of up to 1024 packs: at most two packs a thread,
  // blocks of at most 512 threads, full occupancy.
  if constexpr (N > 1 && sizeof(T) == 2) {
    if (units <= 2 * kOccThreads) {
      // One pack a thread while the GPU is not full of rows (decode shapes:
      // the row's loads over the most threads), else two.
      const bool few_rows = rows < 4 * int64_t{ctx.device.sm_count};
      const RowPlan p = PlanRowsWithItems(rows, units, units <= (few_rows ? kOccThreads : 128) ? 1 : 2);
      return DispatchItems<2>(p.items, [&](auto items) {
        LayerNormKernel<T, N, decltype(items)::value, kOccThreads, kOccBlocks>
            <<<p.grid, p.block, 0, s>>>(x, g, b, y, rows, static_cast<int>(units), eps);
        return CheckLaunch("layernorm");
      });
    }
  }
  const RowPlan p = PlanNormRows(rows, units, kMaxItems<N>, ctx.device.sm_count);
  if (p.items == 0) {
    LayerNormWideKernel<T, N><<<p.grid, p.block, 0, s>>>(x, g, b, y, rows, units, eps);
    return CheckLaunch("layernorm");
  }
  return DispatchItems<kMaxItems<N>>(p.items, [&](auto items) {
    LayerNormKernel<T, N, decltype(items)::value, 1024, 1>
        <<<p.grid, p.block, 0, s>>>(x, g, b, y, rows, static_cast<int>(units), eps);
    return CheckLaunch("layernorm");
  });
}

}  // namespace

Status LayerNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& g = ctx.input("gamma");
  const TensorView& b = ctx.input("beta");
  TensorView& y = ctx.output("y");
  const int64_t h = x.dim(-1);
  const int64_t rows = h == 0 ? 0 : x.numel() / h;
  if (rows == 0) return Status::Ok();
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  return DispatchFloatingCuda(x.dtype, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    const T* gp = g.ptr<T>();
    const T* bp = b.ptr<T>();
    T* yp = y.ptr<T>();
    if (VectorRowsOk<T>(h, {xp, gp, bp, yp}))
      return Launch<T, kVecN<T>>(ctx, xp, gp, bp, yp, rows, h, eps);
    return Launch<T, 1>(ctx, xp, gp, bp, yp, rows, h, eps);
  });
}

KERNELD_IMPL(layernorm, cuda) {
  op.Impl("cuda", LayerNorm, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
