// graph_fuzz: bytes -> v1::ExecuteGraphRequest -> BuildGraphPlan, the whole
// graph decode and validation (bindings, inference through every step's
// schema, storage and the arena plan) up to where buffers would be resolved.
// After a successful plan every invariant the executor relies on is
// checked: each step's views are values that exist and come before it, and
// two arena blocks that live at the same step never share a byte.
// Test ops are served when the request's request_id starts with 't'.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>

#include "graph/graph_plan.h"
#include "kerneld/v1/kerneld.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  kerneld::v1::ExecuteGraphRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return -1;
  kerneld::server::GraphLimits limits;
  limits.max_steps = 64;
  limits.test_ops = !req.request_id().empty() && req.request_id()[0] == 't';
  limits.max_inline_out_bytes = int64_t{256} << 20;
  kerneld::server::GraphPlan plan;
  kerneld::Status st = kerneld::server::BuildGraphPlan(req, limits, &plan);
  if (!st.ok()) {
    if (st.message().empty()) __builtin_trap();  // every refusal says why
    return 0;
  }
  const int n_values = static_cast<int>(plan.values.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto& s = plan.steps[i];
    if (s.op == nullptr || s.inputs.size() != s.op->inputs.size() ||
        s.outputs.size() != s.op->outputs.size() || s.read_from.size() != s.inputs.size())
      __builtin_trap();
    for (int v : s.inputs)
      if (v < 0 || v >= n_values ||
          plan.values[static_cast<size_t>(v)].producer >= static_cast<int>(i))
        __builtin_trap();
  }
  const auto& b = plan.blocks;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].offset < 0 || b[i].offset + b[i].bytes > plan.arena_bytes) __builtin_trap();
    for (size_t j = 0; j < i; ++j) {
      const bool together = !(b[i].last < b[j].first || b[j].last < b[i].first);
      const bool overlap = b[i].bytes > 0 && b[j].bytes > 0 &&
                           b[i].offset < b[j].offset + b[j].bytes &&
                           b[j].offset < b[i].offset + b[i].bytes;
      if (together && overlap) __builtin_trap();
    }
  }
  return 0;
}
