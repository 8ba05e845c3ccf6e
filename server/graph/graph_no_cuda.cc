// Linked into builds without CUDA (graph_device.h, graph_replay.h).
#include "graph/graph_device.h"
#include "graph/graph_replay.h"

namespace kerneld::server {

const GraphDeviceOps* CudaGraphOps() { return nullptr; }

Status RunGraphReplayed(const GraphPlan&, const std::vector<const ImplDef*>&,
                        const GraphReplayOptions&, KernelContext&, bool* ran) {
  *ran = false;
  return Status::Ok();
}

}  // namespace kerneld::server
