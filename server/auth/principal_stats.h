// Per-principal usage the daemon enforces and exports: requests in flight
// per principal, quota refusals, authentication failures. The metrics
// (kerneld_principal_*) never carry a principal label: principals are
// unbounded and may be personal data; logs and traces name them instead.
#pragma once

#include <prometheus/metric_family.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "auth/principal.h"

namespace kerneld::server {

class BufferRegistry;  // buffers/buffer_registry.h

class PrincipalStats {
 public:
  static PrincipalStats& Global();

  // The in-flight counter of `who`'s QuotaPrincipal (created on first use,
  // kept: principals are few, anonymous connections share "anonymous"'s,
  // and a counter must outlive every request that holds it).
  std::shared_ptr<std::atomic<int64_t>> Inflight(const Principal& who);

  enum class Quota { kBytes, kBuffers, kInflight };
  void CountQuotaExceeded(Quota q) { quota_exceeded_[static_cast<int>(q)].fetch_add(1); }
  void CountUnauthenticated() { unauthenticated_.fetch_add(1); }
  void CountPermissionDenied() { permission_denied_.fetch_add(1); }

  // kerneld_principal_* families; buffer use read from `buffers` (may be null).
  std::vector<prometheus::MetricFamily> Collect(const BufferRegistry* buffers) const;

 private:
  mutable std::mutex mu_;
  std::map<Principal, std::shared_ptr<std::atomic<int64_t>>> inflight_;
  std::atomic<uint64_t> quota_exceeded_[3] = {};
  std::atomic<uint64_t> unauthenticated_{0}, permission_denied_{0};
};

}  // namespace kerneld::server
