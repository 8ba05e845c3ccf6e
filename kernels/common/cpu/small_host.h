// The scheduler's one size rule: a small request whose tensors all live in
// host memory (inline bytes, shared memory) runs on the CPU even where a GPU
// is eligible. Staging it through a GPU costs a pinned copy, an H2D copy, a
// launch, a D2H copy and a synchronize: 16-27 us of server time on the H100
// host for 16 float32 elements of scale (docs/performance.md), where a
// linear-time CPU kernel moves 16 KiB in a few microseconds. Tensors already
// on a GPU (CUDA IPC buffers) are unaffected: they pin the request there.
//
// Opt-in per op, for implementations whose cost is linear in the bytes they
// move (elementwise, norms, softmax, rope); a compute-bound op (gemm) keeps
// its device ranking at every size.
#pragma once

#include <cstdint>
#include <optional>

#include "kerneld/op.h"

namespace kerneld::cpu {

// At most this many bytes of inputs and outputs together.
inline constexpr int64_t kSmallHostBytes = int64_t{16} << 10;
// Above every device implementation's static rank (kPriorityDevice).
inline constexpr int kSmallHostRank = kPriorityDevice + 1;

// kSmallHostRank for a host-resident request of at most kSmallHostBytes;
// nullopt (the impl's static rank) otherwise.
std::optional<int> SmallHostRank(const KernelContext& ctx);

// Gives the implementation registered last on `op` the rule above.
void RankSmallHostFirst(OpDef& op);

}  // namespace kerneld::cpu
