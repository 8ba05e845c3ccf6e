// The buffer registry: ids -> regions, ownership, bounds, leases.
//
// Every reference is checked before anything runs: the buffer exists and
// belongs to the caller, offset + nbytes lies inside the region without
// overflow, and the offset is aligned to the dtype.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "auth/principal.h"
#include "buffers/region.h"
#include "kerneld/dtype.h"
#include "kerneld/status.h"

namespace kerneld::server {

// What one principal holds, and may hold (0: no limit); docs/security.md.
struct BufferUsage {
  uint64_t bytes = 0;  // registered + allocated
  uint64_t buffers = 0;
};
struct BufferQuota {
  uint64_t max_bytes = 0;
  uint64_t max_buffers = 0;
};

class BufferRegistry {
 public:
  explicit BufferRegistry(bool start_reaper = true);
  ~BufferRegistry();

  // Takes ownership of `region` (id assigned here); returns the id.
  std::string Add(std::shared_ptr<Region> region);
  // The same within the owner's quota, checked and charged atomically:
  // RESOURCE_EXHAUSTED naming the quota and the current use.
  Status Add(std::shared_ptr<Region> region, const BufferQuota& quota, std::string* id);
  // The same check for `bytes` more, without adding: lets a caller refuse
  // before it opens or allocates anything.
  Status CheckQuota(const Principal& who, uint64_t bytes, const BufferQuota& quota) const;
  // Use by quota principal (QuotaPrincipal): what the quotas compare.
  std::map<Principal, BufferUsage> UsageByPrincipal() const;

  // Consulted by Add, under the registry's lock, for a connection
  // principal: false when its connection is gone, so a registration that
  // finishes after the connection's release (ReleaseOwner) is refused
  // instead of left with no owner to release it. Set before serving.
  using OwnerAlive = std::function<bool(const Principal&)>;
  void SetOwnerAlive(OwnerAlive fn) { owner_alive_ = std::move(fn); }
  // Unregisters every buffer of `who` (its connection closed), each
  // released when its last request lets go, as Unregister does; how many.
  int ReleaseOwner(const Principal& who);

  // Resolves (buffer_id, offset) for a tensor of `nbytes` bytes whose
  // elements are `align` bytes wide. On success *pin holds the region and
  // *ptr points at the first byte. Renews the lease.
  //
  // The absolute address base + offset must be a multiple of `align`: a
  // shared-memory region registered at an odd offset has a misaligned base,
  // and the kernels load elements with natural alignment. Refused, not
  // copied: a copy would turn a zero-copy reference into a silent slow path.
  // A region whose memory went bad (Region::check, Region::faulted) fails
  // here with FAILED_PRECONDITION before anything touches it.
  Status Resolve(const Principal& who, const std::string& buffer_id, uint64_t offset,
                 uint64_t nbytes, uint64_t align, RegionPin* pin, char** ptr);
  // The same for a tensor of `dtype`, whose name then appears in messages.
  Status Resolve(const Principal& who, const std::string& buffer_id, uint64_t offset,
                 uint64_t nbytes, DType dtype, RegionPin* pin, char** ptr);

  // Removes the id now; the memory is released when the last pin drops.
  // *deferred says whether requests still hold it.
  // any_owner (admins): whoever registered it.
  Status Unregister(const Principal& who, const std::string& buffer_id, bool* deferred,
                    bool any_owner = false);
  Status Renew(const Principal& who, const std::string& buffer_id, std::shared_ptr<Region>* out);
  std::vector<std::shared_ptr<Region>> List(const Principal& who) const;
  std::vector<std::shared_ptr<Region>> ListAll() const;  // every principal's (metrics)

  // Unregisters every region whose lease ran out; returns how many.
  int ExpireLeases();
  size_t size() const;

  // Pure bounds arithmetic, exposed for tests: "" when in bounds, else why.
  static std::string CheckBounds(uint64_t offset, uint64_t nbytes, uint64_t region_size,
                                 uint64_t align);

 private:
  Status ResolveImpl(const Principal& who, const std::string& buffer_id, uint64_t offset,
                     uint64_t nbytes, uint64_t align, std::string_view dtype_name, RegionPin* pin,
                     char** ptr);
  Status Find(const Principal& who, const std::string& id, std::shared_ptr<Region>* out) const;
  Status CheckQuotaLocked(const Principal& who, uint64_t bytes, const BufferQuota& quota) const;
  void UntrackLocked(const Region& r);
  void ReaperLoop();

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_;
  std::map<Principal, BufferUsage> usage_;  // by owner; principals holding buffers only
  std::map<Principal, BufferUsage, std::less<>> quota_usage_;  // by QuotaPrincipal(owner)
  OwnerAlive owner_alive_;
  uint64_t next_id_ = 1;
  std::thread reaper_;
  std::condition_variable cv_;
  bool stop_ = false;
};

int64_t SteadyNowNs();

// Call when a request that holds `pins` has finished running (before its
// response is sent): FAILED_PRECONDITION when one of its regions faulted
// meanwhile (its owner shrank a shared-memory object under the kernel), so
// the request fails instead of returning zeros as results; OK otherwise.
Status CheckPinsAfterUse(const std::vector<RegionPin>& pins);

// The status of a faulted region, shared by Resolve and CheckPinsAfterUse.
Status FaultedStatus(const Region& r);

}  // namespace kerneld::server
