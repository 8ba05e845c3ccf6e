// Linked into builds without CUDA (graph_device.h).
#include "graph/graph_device.h"

namespace kerneld::server {

const GraphDeviceOps* CudaGraphOps() { return nullptr; }

}  // namespace kerneld::server
