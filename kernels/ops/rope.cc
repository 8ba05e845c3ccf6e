// rope: rotary position embedding of q and k, in place.
#include <string>

#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

namespace {

// rot_dim (the cache's width) must be even and fit in a head.
Status CheckRotDim(const OpDef& op, const std::vector<TensorView>&, const AttrMap&,
                   ShapeBindings* bind) {
  const int64_t rot = bind->symbols.at("rot_dim");
  const int64_t head = bind->symbols.at("head_dim");
  if (rot <= 0 || rot % 2 != 0 || rot > head) {
    return InvalidArgument(op.name + ": 'cos_sin_cache' dim 1 ('rot_dim'): expected an even value in [2, head_dim=" +
                           std::to_string(head) + "], got " + std::to_string(rot));
  }
  return Status::Ok();
}

}  // namespace

KERNELD_OP(rope) {
  OpDef op("rope");
  op.Doc("Rotary position embedding, in place on q and k. For each token t the angle row is "
         "cos_sin_cache[positions[t]] = [cos(rot_dim/2) | sin(rot_dim/2)]. is_neox=true rotates "
         "halves (x[i], x[i + rot_dim/2]); is_neox=false (GPT-J) rotates interleaved pairs "
         "(x[2i], x[2i+1]): (x1, x2) -> (x1*cos - x2*sin, x2*cos + x1*sin). Dims beyond rot_dim "
         "are unchanged. Computed in float32, rounded once to q's dtype. A position outside "
         "[0, max_position) is INVALID_ARGUMENT on the cpu backend (checked before anything is "
         "written); the cuda backend cannot report it and leaves that token's q and k unchanged.")
      .Input("q", kFloatingTypes, "[num_tokens, num_q_heads, head_dim]", "queries")
      .Input("k", kFloatingTypes, "[num_tokens, num_kv_heads, head_dim]", "keys, q's dtype")
      .Input("positions", kIndexTypes, "[num_tokens]", "each token's position")
      .Input("cos_sin_cache", {DType::kFloat32}, "[max_position, rot_dim]",
             "float32; cos in the first rot_dim/2 columns, sin in the rest")
      .SameDType("q", "k")
      .Check(CheckRotDim)
      .Output("q", SameAs("q"), "q rotated, in place")
      .InPlace("q", "q")
      .Output("k", SameAs("k"), "k rotated, in place")
      .InPlace("k", "k")
      .AttrWithDefault("is_neox", AttrType::kBool, true,
                       "true: NeoX style (rotate halves); false: GPT-J style (interleaved pairs)")
      .Impl("cpu", cpu::Rope, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::Rope, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
