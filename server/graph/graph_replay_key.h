// The replay cache's key (graph_replay.h, docs/graphs.md "When replay
// applies"), apart from CUDA so the unit tests check it on any build.
#pragma once

#include <string>
#include <vector>

#include "graph/graph_exec.h"

namespace kerneld::server {

// What must repeat, attr values aside: every value's dtype, shape and
// place (the arena's layout), every step's op, chosen impl and bindings.
std::string GraphStructureKey(const GraphPlan& plan, const std::vector<const ImplDef*>& impls);

// `structure` and the memory: per graph input and output, a staged slot
// (replay.inputs[i] "") or the buffer's id, offset and address.
std::string GraphReplayKey(const std::string& structure, const GraphReplayOptions& replay,
                           const std::vector<TensorView>& inputs,
                           const std::vector<TensorView>& outputs);

}  // namespace kerneld::server
