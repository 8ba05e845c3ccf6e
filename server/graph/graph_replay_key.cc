#include "graph/graph_replay_key.h"

#include <cstdint>

namespace kerneld::server {

namespace {

void MemoryKey(const std::vector<std::string>& ids, const std::vector<TensorView>& views, char tag,
               std::string* k) {
  for (size_t i = 0; i < views.size(); ++i) {
    *k += tag;
    if (i >= ids.size() || ids[i].empty()) {
      *k += 'S';  // staged: a slot of the entry, whatever the worker's address
    } else {
      *k += ids[i];
      *k += '@';
      *k += std::to_string(reinterpret_cast<uintptr_t>(views[i].raw()));
    }
  }
}

}  // namespace

std::string GraphStructureKey(const GraphPlan& plan, const std::vector<const ImplDef*>& impls) {
  std::string k;
  k.reserve(64 * (plan.values.size() + plan.steps.size()));
  auto num = [&k](int64_t v) {
    k += std::to_string(v);
    k += ',';
  };
  num(plan.arena_bytes);
  for (const GraphValue& v : plan.values) {
    k += 'v';
    num(static_cast<int64_t>(v.dtype));
    for (int64_t d : v.shape) num(d);
    k += ':';
    num(static_cast<int64_t>(v.storage.kind));
    num(v.storage.index);
    num(v.storage.offset);
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const GraphStepPlan& st = plan.steps[i];
    k += 's';
    k += st.op->name;
    k += ':';
    num(i < impls.size() ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(impls[i])) : 0);
    for (int id : st.read_from) num(id);
    k += '>';
    for (int id : st.outputs) num(id);
    for (const auto& [from, to] : st.copies) num(from), num(to);
  }
  return k;
}

std::string GraphReplayKey(const std::string& structure, const GraphReplayOptions& replay,
                           const std::vector<TensorView>& inputs,
                           const std::vector<TensorView>& outputs) {
  std::string k = structure;
  MemoryKey(replay.inputs, inputs, 'i', &k);
  MemoryKey(replay.outputs, outputs, 'o', &k);
  return k;
}

}  // namespace kerneld::server
