#include "graph/graph_memory.h"

#include <algorithm>

#include "kerneld/size.h"

namespace kerneld::server {

int64_t PlanArena(std::vector<GraphArenaBlock>* blocks) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t total = 0;
  // Placed blocks, kept sorted by offset for the gap search.
  std::vector<size_t> placed;
  placed.reserve(blocks->size());
  for (size_t b = 0; b < blocks->size(); ++b) {
    GraphArenaBlock& blk = (*blocks)[b];
    const int64_t size = (blk.bytes + kGraphArenaAlign - 1) / kGraphArenaAlign * kGraphArenaAlign;
    int64_t offset = 0;
    for (size_t p : placed) {
      const GraphArenaBlock& o = (*blocks)[p];
      if (o.last < blk.first || blk.last < o.first) continue;  // lives apart: may share bytes
      const int64_t o_size = (o.bytes + kGraphArenaAlign - 1) / kGraphArenaAlign * kGraphArenaAlign;
      if (o.offset >= offset + size) break;  // the gap before it fits
      offset = std::max(offset, o.offset + o_size);
    }
    if (offset > kLimit - size) return -1;
    blk.offset = offset;
    total = std::max(total, offset + size);
    auto at = std::lower_bound(placed.begin(), placed.end(), offset,
                               [&](size_t p, int64_t off) { return (*blocks)[p].offset < off; });
    placed.insert(at, b);
  }
  return total;
}

}  // namespace kerneld::server
