// rope, CUDA binding: adapts the KernelContext to the launcher in cuda.cuh
// (copying q and k to distinct outputs first) and registers the impl.
#include <climits>
#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/rope/cuda.cuh"

namespace kerneld::cuda {

namespace {

template <typename T>
Status RopeTyped(KernelContext& ctx) {
  const TensorView& q_in = ctx.input("q");
  const TensorView& k_in = ctx.input("k");
  const TensorView& pos = ctx.input("positions");
  const TensorView& cache = ctx.input("cos_sin_cache");
  TensorView& q = ctx.output("q");
  TensorView& k = ctx.output("k");
  cudaStream_t s = StreamOf(ctx);
  // In place is the contract; a distinct output gets the input first.
  if (q.raw() != q_in.raw())
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(q.raw(), q_in.raw(), static_cast<size_t>(q_in.nbytes()),
                                   cudaMemcpyDeviceToDevice, s),
                   "rope: copying q"));
  if (k.raw() != k_in.raw())
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(k.raw(), k_in.raw(), static_cast<size_t>(k_in.nbytes()),
                                   cudaMemcpyDeviceToDevice, s),
                   "rope: copying k"));
  const int64_t head = q_in.dim(2);
  // The kernel indexes a token's (head, pair) units with int.
  if (head > INT32_MAX || (q_in.dim(1) + k_in.dim(1)) * (cache.dim(1) / 2) > INT32_MAX)
    return InvalidArgument("rope: cuda needs (num_q_heads + num_kv_heads) * rot_dim / 2 < 2^31");
  const bool neox = ctx.attr_b("is_neox");
  auto go = [&](auto* p) {
    return CudaStatus(
        rope::Rope<T>(q.ptr<T>(), k.ptr<T>(), p, cache.ptr<float>(), q_in.dim(0), q_in.dim(1),
                      k_in.dim(1), head, cache.dim(1), cache.dim(0), neox, ctx.device.sm_count, s),
        "rope");
  };
  if (pos.dtype == DType::kInt64) return go(pos.ptr<int64_t>());
  return go(pos.ptr<int32_t>());
}

Status Rope(KernelContext& ctx) {
  return DispatchFloatingCuda(ctx.input("q").dtype, "rope",
                              [&](auto tag) { return RopeTyped<decltype(tag)>(ctx); });
}

}  // namespace

KERNELD_IMPL(rope, cuda) { op.Impl("cuda", Rope, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
