// The buffer registry: ids -> regions, ownership, bounds, leases.
//
// Every reference is checked before anything runs: the buffer exists and
// belongs to the caller, offset + nbytes lies inside the region without
// overflow, and the offset is aligned to the dtype.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "buffers/region.h"
#include "kerneld/status.h"

namespace kerneld::server {

// A principal: who is asking. With no authentication configured every
// client is the same principal; the registry never assumes that.
using Principal = std::string;
inline constexpr char kAnonymous[] = "anonymous";

class BufferRegistry {
 public:
  explicit BufferRegistry(bool start_reaper = true);
  ~BufferRegistry();

  // Takes ownership of `region` (id assigned here); returns the id.
  std::string Add(std::shared_ptr<Region> region);

  // Resolves (buffer_id, offset) for a tensor of `nbytes` bytes whose
  // elements are `align` bytes wide. On success *pin holds the region and
  // *ptr points at the first byte. Renews the lease.
  Status Resolve(const Principal& who, const std::string& buffer_id, uint64_t offset, uint64_t nbytes,
                 uint64_t align, RegionPin* pin, char** ptr);

  // Removes the id now; the memory is released when the last pin drops.
  // *deferred says whether requests still hold it.
  Status Unregister(const Principal& who, const std::string& buffer_id, bool* deferred);
  Status Renew(const Principal& who, const std::string& buffer_id, std::shared_ptr<Region>* out);
  std::vector<std::shared_ptr<Region>> List(const Principal& who) const;
  std::vector<std::shared_ptr<Region>> ListAll() const;  // every principal's (metrics)

  // Unregisters every region whose lease ran out; returns how many.
  int ExpireLeases();
  size_t size() const;

  // Pure bounds arithmetic, exposed for tests: "" when in bounds, else why.
  static std::string CheckBounds(uint64_t offset, uint64_t nbytes, uint64_t region_size, uint64_t align);

 private:
  Status Find(const Principal& who, const std::string& id, std::shared_ptr<Region>* out) const;
  void ReaperLoop();

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_;
  uint64_t next_id_ = 1;
  std::thread reaper_;
  std::condition_variable cv_;
  bool stop_ = false;
};

int64_t SteadyNowNs();

}  // namespace kerneld::server
