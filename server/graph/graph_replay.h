// CUDA graph replay of request graphs (docs/graphs.md, "Replay"). A graph
// whose structure (ops, chosen impls, bindings, shapes, dtypes, arena
// layout) and memory (the buffers' ids, offsets and addresses) repeat is
// captured once on the worker thread's stream (stream capture of the very
// launches a direct run makes) and then replayed with one cudaGraphLaunch.
//
// The cache is per worker thread and device: an entry is launched only on
// the stream that captured it, so its arena, its staging slots and any
// per-thread library workspace (cuBLASLt's) it captured are never used by
// two streams at once. Each entry owns the stable device memory a replay
// needs: the intermediates' arena, and a slot per input or output the
// worker stages from host memory (copied in before the launch, out after).
// Attr values are not in the key: a call whose attrs differ from the
// captured ones re-captures and updates the executable graph in place
// (cudaGraphExecUpdate), instantiating anew only when the update is
// refused. A call whose capture fails (an impl that synchronizes or
// allocates) runs directly; a structure that fails twice runs directly
// from then on.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "graph/graph_exec.h"

namespace kerneld::server {

// Runs `plan` as a replay of a cached CUDA graph (capturing it first on a
// miss). *ran false with OK: not replayed (caching off, too large, or not
// capturable); the caller runs it directly. Builds without CUDA never
// replay.
Status RunGraphReplayed(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                        const GraphReplayOptions& replay, KernelContext& ctx, bool* ran);

// A graph's entry holds at most this much device memory (arena and staging
// slots); a larger graph runs directly, every call.
inline constexpr int64_t kMaxReplayEntryBytes = int64_t{256} << 20;

// Counters over every device and worker thread (docs/metrics.md, "Graphs").
struct GraphReplayStats {
  std::atomic<uint64_t> hits{0};          // replays of a cached graph
  std::atomic<uint64_t> captures{0};      // graphs captured and instantiated
  std::atomic<uint64_t> updates{0};       // re-captures for new attr values
  std::atomic<uint64_t> uncapturable{0};  // captures that failed (run directly)
  std::atomic<int64_t> entries{0};        // executable graphs cached now
};
GraphReplayStats& ReplayStats();

}  // namespace kerneld::server
