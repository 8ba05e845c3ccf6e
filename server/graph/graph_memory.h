// The arena of a graph's intermediates: blocks with a size and the steps
// during which they are live, placed at offsets so that two blocks share
// bytes only when their lives do not overlap (a block dies after its last
// reader has run, and the next one may take its place). One allocation of
// the arena's size then serves the whole graph: on CUDA one stream-ordered
// allocation per run, at a stable size for the pool to reuse.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph_plan.h"

namespace kerneld::server {

// Every block starts on this boundary (kernels load 128-bit vectors; the
// CUDA worker stages at 256 too).
inline constexpr int64_t kGraphArenaAlign = 256;

// Sets each block's offset (first fit, in the order given) and returns the
// arena's size, or -1 when it would exceed 2^62 bytes (no client reaches it:
// each block is at most kMaxTensorBytes and the step count is bounded).
int64_t PlanArena(std::vector<GraphArenaBlock>* blocks);

}  // namespace kerneld::server
