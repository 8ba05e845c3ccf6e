// A graph request, decoded and validated whole before anything runs: every
// step's op, attrs and input bindings resolved, shapes and dtypes inferred
// through the steps by each op's schema (kerneld/call.h), the outputs
// chosen, and every intermediate given a place in one arena whose blocks are
// reused once their last reader has run (graph_memory.h). Nothing here
// touches client memory or a device: the graph input views carry dtype and
// shape only; service code (graph_runner.h) resolves the bytes. The fuzzer
// (tests/fuzz/graph_fuzz.cc) drives BuildGraphPlan directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kerneld/call.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::server {

struct GraphLimits {
  int max_steps = 256;  // --max_graph_steps
  bool test_ops = false;
  // Largest inline response (--max_message_mb); 0: unbounded.
  int64_t max_inline_out_bytes = 0;
};

// Where a value's bytes live while the graph runs.
struct GraphStorage {
  enum class Kind { kInput, kOutput, kArena };
  Kind kind = Kind::kArena;
  int index = -1;      // kInput: graph input; kOutput: graph output; kArena: block
  int64_t offset = 0;  // kArena: bytes from the arena's start (set by PlanArena)
};

// One tensor of the graph: a graph input or a step's output.
struct GraphValue {
  DType dtype = DType::kInvalid;
  Shape shape;
  int64_t bytes = 0;
  int producer = -1;      // step index; -1 for a graph input
  int output = -1;        // the producer's output index
  int last_reader = -1;   // last step reading it; -1: none
  int graph_output = -1;  // index in GraphPlan::outputs when returned
  GraphStorage storage;
};

struct GraphStepPlan {
  const OpDef* op = nullptr;
  std::string name;          // "step0" unless named
  std::string backend;       // the request's hint
  AttrMap attrs;             // resolved, defaults filled in
  std::vector<int> inputs;   // value ids in the op's input order
  std::vector<int> outputs;  // value ids in the op's output order
  // Copies before the step runs (value id from -> value id to): an in-place
  // output that cannot take over its input's memory starts as its copy.
  std::vector<std::pair<int, int>> copies;
  // Per op input: the value whose storage the kernel reads there (differs
  // from `inputs` for an in-place input that was copied).
  std::vector<int> read_from;
};

struct GraphOutputPlan {
  std::string name;
  int value = -1;
  bool to_buffer = false;
  v1::BufferRef buffer;
};

struct GraphArenaBlock {
  int64_t bytes = 0;
  int first = 0, last = 0;  // steps during which it is live (inclusive)
  int64_t offset = 0;
};

struct GraphPlan {
  std::vector<std::string> input_names;  // graph inputs, sorted by name
  std::vector<GraphValue> values;        // graph inputs first, in input_names order
  std::vector<GraphStepPlan> steps;
  std::vector<GraphOutputPlan> outputs;
  std::vector<GraphArenaBlock> blocks;
  int64_t arena_bytes = 0;         // the arena after reuse
  int64_t intermediate_bytes = 0;  // every intermediate's bytes, before reuse
  int64_t inline_out_bytes = 0;    // outputs returned inline

  // "step 2 (silu_and_mul)": how errors name a step.
  std::string StepLabel(size_t i) const;
};

// Decodes and validates `req` into *plan (no buffer resolved, nothing run).
// Every refusal names the step (index and op), the tensor and the reason.
Status BuildGraphPlan(const v1::ExecuteGraphRequest& req, const GraphLimits& limits,
                      GraphPlan* plan);

}  // namespace kerneld::server
