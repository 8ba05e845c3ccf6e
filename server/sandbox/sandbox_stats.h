// The sandbox's counters (docs/metrics.md, "User kernels"), process-wide
// over every GPU's worker: workers started, workers replaced by what ended
// them, and EvaluateKernel calls by their answer. Read at scrape time by
// metrics/sandbox_metrics.h.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "kerneld/status.h"

namespace kerneld::server::sandbox {

struct SandboxStats {
  std::atomic<uint64_t> starts{0};  // workers started, the first ones included
  // Workers killed and replaced: the kernel faulted (the worker reported a
  // sticky CUDA error), ran past --user_kernel_timeout_ms, or the worker
  // died (a signal, an exit).
  std::atomic<uint64_t> faults{0}, timeouts{0}, crashes{0};
  std::atomic<uint64_t> start_ns{0};  // the last start, until its first ping's answer
  std::array<std::atomic<uint64_t>, 17> evaluations_by_code{};  // indexed by StatusCode
  void CountEvaluation(StatusCode code) {
    const auto c = static_cast<size_t>(code);
    if (c < evaluations_by_code.size())
      evaluations_by_code[c].fetch_add(1, std::memory_order_relaxed);
  }
  static SandboxStats& Global() {
    static SandboxStats* s = new SandboxStats();  // never destroyed: read by late scrapes
    return *s;
  }
};

}  // namespace kerneld::server::sandbox
