// rope: rotary position embedding of q and k, in place.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

// rot_dim (the cache's width) must be even and fit in a head.
Status CheckRotDim(const OpDef& op, const std::vector<TensorView>&, const AttrMap&,
                   ShapeBindings* bind) {
  const int64_t rot = bind->symbols.at("rot_dim");
  const int64_t head = bind->symbols.at("head_dim");
  if (rot <= 0 || rot % 2 != 0 || rot > head) {
    return InvalidArgument(
        op.name + ": 'cos_sin_cache' dim 1 ('rot_dim'): expected an even value in [2, head_dim=" +
        std::to_string(head) + "], got " + std::to_string(rot));
  }
  return Status::Ok();
}

bool RopeReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                   std::string* error) {
  const HostTensor* q = RefInput(in, "q", "rope", error);
  const HostTensor* k = RefInput(in, "k", "rope", error);
  const HostTensor* pos = RefInput(in, "positions", "rope", error);
  const HostTensor* cache = RefInput(in, "cos_sin_cache", "rope", error);
  if (!q || !k || !pos || !cache) return false;
  if (q->shape.size() != 3 || k->shape.size() != 3 || cache->shape.size() != 2)
    return *error = "rope: bad ranks", false;
  const bool neox = AttrOr(attrs, "is_neox", true);
  const int64_t rot = cache->shape[1], half = rot / 2, max_pos = cache->shape[0];
  auto rotate = [&](const HostTensor& x, HostTensor* y) -> bool {
    *y = x;
    const int64_t tokens = x.shape[0], heads = x.shape[1], dim = x.shape[2];
    for (int64_t t = 0; t < tokens; ++t) {
      const auto p = static_cast<int64_t>(pos->values[static_cast<size_t>(t)]);
      if (p < 0 || p >= max_pos) return *error = "rope: position out of range", false;
      const double* cs = cache->values.data() + p * rot;
      for (int64_t h = 0; h < heads; ++h) {
        double* v = y->values.data() + (t * heads + h) * dim;
        for (int64_t i = 0; i < half; ++i) {
          double& a = neox ? v[i] : v[2 * i];
          double& b = neox ? v[i + half] : v[2 * i + 1];
          const double x1 = a, x2 = b;
          a = x1 * cs[i] - x2 * cs[half + i];
          b = x2 * cs[i] + x1 * cs[half + i];
        }
      }
    }
    return true;
  };
  return rotate(*q, &(*out)["q"]) && rotate(*k, &(*out)["k"]);
}

}  // namespace

KERNELD_OP(rope) {
  OpDef op("rope");
  op.Doc(
        "Rotary position embedding, in place on q and k. For each token t the angle row is "
        "cos_sin_cache[positions[t]] = [cos(rot_dim/2) | sin(rot_dim/2)]. is_neox=true rotates "
        "halves (x[i], x[i + rot_dim/2]); is_neox=false (GPT-J) rotates interleaved pairs "
        "(x[2i], x[2i+1]): (x1, x2) -> (x1*cos - x2*sin, x2*cos + x1*sin). Dims beyond rot_dim "
        "are unchanged. Computed in float32, rounded once to q's dtype. A position outside "
        "[0, max_position) is INVALID_ARGUMENT on the cpu backend (checked before anything is "
        "written); the cuda backend cannot report it and leaves that token's q and k unchanged.")
      .Input("q", kFloatingTypes, "[num_tokens, num_q_heads, head_dim]", "queries")
      .Input("k", kFloatingTypes, "[num_tokens, num_kv_heads, head_dim]", "keys, q's dtype")
      .Input("positions", kIndexTypes, "[num_tokens]", "each token's position")
      .Gen(InputGen::kIndex, "max_position")
      .Input("cos_sin_cache", {DType::kFloat32}, "[max_position, rot_dim]",
             "float32; cos in the first rot_dim/2 columns, sin in the rest")
      .GenShape("[num_tokens, head_dim]")  // a position per token, the whole head rotated
      .SameDType("q", "k")
      .Check(CheckRotDim)
      .Output("q", SameAs("q"), "q rotated, in place")
      .InPlace("q", "q")
      .Output("k", SameAs("k"), "k rotated, in place")
      .InPlace("k", "k")
      .AttrWithDefault("is_neox", AttrType::kBool, true,
                       "true: NeoX style (rotate halves); false: GPT-J style (interleaved pairs)");
  op.Reference(RopeReference);
  op.Bench({[](int64_t t, int64_t h) {
              return std::map<std::string, Shape>{{"q", {t, h / 128, 128}},
                                                  {"k", {t, std::max<int64_t>(1, h / 512), 128}},
                                                  {"positions", {t}},
                                                  {"cos_sin_cache", {8192, 128}}};
            },
            {}});
  return op;
}

}  // namespace kerneld
