// rope, CPU: rotates q and k in place in float32, rounding once per element.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/cpu/dispatch.h"
#include "common/cpu/small_host.h"
#include "kerneld/half.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

// One head: the first rot_dim dims of x rotate by the angles in cos/sin.
template <typename T>
void RotateHead(T* x, const float* cos, const float* sin, int64_t half, bool neox) {
  // NeoX pairs (i, i + half); GPT-J pairs (2i, 2i + 1).
  const int64_t stride = neox ? 1 : 2, offset = neox ? half : 1;
  for (int64_t i = 0; i < half; ++i) {
    T* p1 = x + i * stride;
    T* p2 = p1 + offset;
    const float x1 = ToFloat(*p1), x2 = ToFloat(*p2);
    *p1 = FromFloat<T>(x1 * cos[i] - x2 * sin[i]);
    *p2 = FromFloat<T>(x2 * cos[i] + x1 * sin[i]);
  }
}

template <typename T, typename P>
Status RopeTyped(KernelContext& ctx) {
  const TensorView& q_in = ctx.input("q");
  const TensorView& k_in = ctx.input("k");
  const TensorView& pos_v = ctx.input("positions");
  const TensorView& cache = ctx.input("cos_sin_cache");
  TensorView& q = ctx.output("q");
  TensorView& k = ctx.output("k");
  const int64_t tokens = q_in.dim(0), hq = q_in.dim(1), hk = k_in.dim(1), head = q_in.dim(2);
  const int64_t max_pos = cache.dim(0), rot = cache.dim(1);
  const P* pos = pos_v.ptr<P>();
  // Reject bad positions before writing anything: a failed request leaves
  // q and k as they were.
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t p = static_cast<int64_t>(pos[t]);
    if (p < 0 || p >= max_pos)
      return InvalidArgument("rope: positions[" + std::to_string(t) + "] = " + std::to_string(p) +
                             " is outside [0, max_position=" + std::to_string(max_pos) + ")");
  }
  // In place is the contract; a distinct output gets the input first.
  if (q.raw() != q_in.raw()) std::memcpy(q.raw(), q_in.raw(), static_cast<size_t>(q_in.nbytes()));
  if (k.raw() != k_in.raw()) std::memcpy(k.raw(), k_in.raw(), static_cast<size_t>(k_in.nbytes()));
  const bool neox = ctx.attr_b("is_neox");
  const float* cs = cache.ptr<float>();
  T* qp = q.ptr<T>();
  T* kp = k.ptr<T>();
  const int64_t work = std::max<int64_t>(1, (hq + hk) * rot);
  ParallelFor(ctx.pool, tokens, std::max<int64_t>(1, kElementwiseGrain / work),
              [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                  const float* cos = cs + static_cast<int64_t>(pos[t]) * rot;
                  const float* sin = cos + rot / 2;
                  for (int64_t h = 0; h < hq; ++h)
                    RotateHead(qp + (t * hq + h) * head, cos, sin, rot / 2, neox);
                  for (int64_t h = 0; h < hk; ++h)
                    RotateHead(kp + (t * hk + h) * head, cos, sin, rot / 2, neox);
                }
              });
  return Status::Ok();
}

}  // namespace

Status Rope(KernelContext& ctx) {
  const bool i64 = ctx.input("positions").dtype == DType::kInt64;
  return DispatchFloating(ctx.input("q").dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    return i64 ? RopeTyped<T, int64_t>(ctx) : RopeTyped<T, int32_t>(ctx);
  });
}

KERNELD_IMPL(rope, cpu) {
  op.Impl("cpu", Rope, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
