// A validated, placed graph as one unit of work for a device worker. The
// worker sees an ordinary Task: its op is the synthetic "graph" op (never
// registered: clients cannot call it), its views are the graph's inputs and
// outputs (which the CUDA worker stages like any request's), and its impl
// runs every step in order on the worker's thread, device and stream, with
// the intermediates in one arena (graph_memory.h). So the graph is queued,
// timed, cancelled and health-checked by the same worker code as a kernel.
#pragma once

#include <memory>
#include <vector>

#include "graph/graph_plan.h"

namespace kerneld::server {

// The op of every graph Task: "graph", with as many (anonymous) outputs as
// a graph may declare; no inputs, no impls.
const OpDef& GraphOpDef();

// Runs `plan`'s steps with impls[i] for step i on ctx's device, stream and
// thread pool. ctx.inputs are the graph inputs (plan.input_names order),
// ctx.outputs the graph outputs (plan.outputs order). A failed step answers
// its status, prefixed with the step's index and op.
Status RunGraph(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                KernelContext& ctx);

// The ImplDef a graph Task runs: RunGraph over `plan` (kept alive by the
// returned function), accepted on devices of `kind`.
ImplDef MakeGraphImpl(std::shared_ptr<const GraphPlan> plan, std::vector<const ImplDef*> impls,
                      DeviceKind kind, std::string backend);

}  // namespace kerneld::server
