// A validated, placed graph as one unit of work for a device worker. The
// worker sees an ordinary Task: its op is the synthetic "graph" op (never
// registered: clients cannot call it), its views are the graph's inputs and
// outputs (which the CUDA worker stages like any request's), and its impl
// runs every step in order on the worker's thread, device and stream, with
// the intermediates in one arena (graph_memory.h). So the graph is queued,
// timed, cancelled and health-checked by the same worker code as a kernel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/graph_device.h"
#include "graph/graph_plan.h"

namespace kerneld::server {

// The op of every graph Task: "graph", with as many (anonymous) outputs as
// a graph may declare; no inputs, no impls.
const OpDef& GraphOpDef();

// What a graph Task knows of its call beyond the plan, for CUDA graph
// replay (graph_replay.h). Per graph input and output: "" when the worker
// stages it (host memory: its device address changes from call to call),
// else what names the memory for good: the buffer's id and offset (ids are
// never reused, so a buffer unregistered and another registered at the same
// address never match).
struct GraphReplayOptions {
  int cache_entries = 0;  // --graph_cache_entries; 0: never replay
  std::vector<std::string> inputs, outputs;
};

// Enqueues `plan`'s steps on ctx's device and stream with `inputs` and
// `outputs` as the graph's tensors and `arena` (plan.arena_bytes) for the
// intermediates: what a run launches, and what replay captures.
Status RunGraphSteps(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                     const GraphDeviceOps& ops, const KernelContext& ctx,
                     const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                     char* arena);

// Runs `plan`'s steps with impls[i] for step i on ctx's device, stream and
// thread pool. ctx.inputs are the graph inputs (plan.input_names order),
// ctx.outputs the graph outputs (plan.outputs order). A failed step answers
// its status, prefixed with the step's index and op.
Status RunGraph(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                KernelContext& ctx);

// The ImplDef a graph Task runs: on CUDA a replay of a cached CUDA graph
// when `replay` allows it (graph_replay.h), else RunGraph over `plan` (kept
// alive by the returned function); accepted on devices of `kind`.
ImplDef MakeGraphImpl(std::shared_ptr<const GraphPlan> plan, std::vector<const ImplDef*> impls,
                      DeviceKind kind, std::string backend, GraphReplayOptions replay = {});

}  // namespace kerneld::server
