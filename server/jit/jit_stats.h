// The JIT's counters, as plain atomics: the metrics module reads them when
// Prometheus scrapes (docs/metrics.md), the tests read them directly.
#pragma once

#include <atomic>
#include <cstdint>

#include "metrics/atomic_histogram.h"

namespace kerneld::server::jit {

struct JitStats {
  std::atomic<uint64_t> hits{0};              // modules found in the disk cache
  std::atomic<uint64_t> misses{0};            // lookups that had to compile
  std::atomic<uint64_t> compiles{0};          // NVRTC compiles that succeeded
  std::atomic<uint64_t> compile_failures{0};  // ... and that failed
  std::atomic<uint64_t> corrupt{0};           // entries that failed their check, removed
  std::atomic<uint64_t> evictions{0};         // entries removed for the size cap
  std::atomic<uint64_t> store_failures{0};    // entries that could not be written
  std::atomic<int64_t> entries{0};            // entries in the cache directory
  std::atomic<int64_t> bytes{0};              // ... and their bytes
  AtomicHistogram compile_seconds;            // each successful compile's wall time
};

// The process's counters (one daemon, one JIT).
JitStats& Stats();

}  // namespace kerneld::server::jit
