// scale, CUDA: y = x * factor in float32, rounded once to x's dtype.
//
// The vector path moves 16 bytes per thread per iteration (grid-stride);
// the head/tail that breaks 16-byte alignment or a partial vector runs the
// scalar path, so every size and offset is correct.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

template <typename T>
__global__ void ScaleVecKernel(const Vec16<T>* __restrict__ x, Vec16<T>* __restrict__ y,
                               int64_t nvec, float f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec;
       i += int64_t{gridDim.x} * blockDim.x) {
    Vec16<T> v = x[i];
#pragma unroll
    for (int k = 0; k < Vec16<T>::kN; ++k) v.v[k] = FromF<T>(ToF(v.v[k]) * f);
    y[i] = v;
  }
}

template <typename T>
__global__ void ScaleScalarKernel(const T* x, T* y, int64_t n, float f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = FromF<T>(ToF(x[i]) * f);
}

template <typename T>
Status Launch(const KernelContext& ctx, const void* xv, void* yv, int64_t n, float f) {
  cudaStream_t s = StreamOf(ctx);
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  constexpr int kN = Vec16<T>::kN;
  const bool vec_ok = IsAligned16(x) && IsAligned16(y);
  const int64_t nvec = vec_ok ? n / kN : 0;
  if (nvec > 0) {
    ScaleVecKernel<T><<<GridFor(ctx, nvec, 256), 256, 0, s>>>(
        reinterpret_cast<const Vec16<T>*>(x), reinterpret_cast<Vec16<T>*>(y), nvec, f);
    KERNELD_RETURN_IF_ERROR(CheckLaunch("scale"));
  }
  const int64_t done = nvec * kN;
  if (done < n) {
    ScaleScalarKernel<T><<<GridFor(ctx, n - done, 256), 256, 0, s>>>(x + done, y + done,
                                                                     n - done, f);
    KERNELD_RETURN_IF_ERROR(CheckLaunch("scale"));
  }
  return Status::Ok();
}

}  // namespace

Status Scale(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  const float f = static_cast<float>(ctx.attr_f("factor"));
  const int64_t n = x.numel();
  if (n == 0) return Status::Ok();
  switch (x.dtype) {
    case DType::kFloat16: return Launch<__half>(ctx, x.raw(), y.raw(), n, f);
    case DType::kBFloat16: return Launch<__nv_bfloat16>(ctx, x.raw(), y.raw(), n, f);
    case DType::kFloat32: return Launch<float>(ctx, x.raw(), y.raw(), n, f);
    default: return InvalidArgument("scale: cuda has no " + std::string(DTypeName(x.dtype)) + " kernel");
  }
}

KERNELD_IMPL(scale, cuda) { op.Impl("cuda", Scale, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
