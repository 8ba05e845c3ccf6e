// A registered memory region: where it lives, how big, who owns it, and how
// to release it. Requests pin a region by holding a shared_ptr to it, so the
// release (munmap, cudaIpcCloseMemHandle, cudaFree) runs only after the last
// request using it has finished: unregistering a region in use is deferred
// by construction, never a use-after-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld::server {

enum class BufferKind { kCudaIpc, kServerAllocated, kSharedMemory };
std::string_view BufferKindName(BufferKind k);

struct Region {
  std::string id;
  BufferKind kind = BufferKind::kSharedMemory;
  Device device;
  std::string device_uuid;
  char* base = nullptr;
  uint64_t size = 0;
  std::string name;
  std::string owner;  // the principal that registered it
  uint32_t lease_seconds = 0;
  std::atomic<int> inflight{0};
  std::function<void()> release;  // frees the resources; runs once

  // Lease expiry, as steady-clock nanoseconds (atomic: renewed on every use).
  std::atomic<int64_t> expires_ns{0};

  // Why the memory can no longer be used, checked on every Resolve; unset
  // means always usable. Shared memory sets it: its owner can shrink the
  // object under the mapping, and touching pages past the new end is SIGBUS.
  std::function<Status()> check;

  // Set by the SIGBUS handler when the owner shrank a shared-memory object
  // while a request was touching it: the mapping now holds private zero
  // pages, so that request's results (and every later use) are void.
  std::atomic<bool> fault_flag{false};
  bool faulted() const { return fault_flag.load(std::memory_order_acquire); }

  ~Region() {
    if (release) release();
  }
};

// Held by a request for each region it uses.
class RegionPin {
 public:
  RegionPin() = default;
  explicit RegionPin(std::shared_ptr<Region> r) : region_(std::move(r)) {
    if (region_) region_->inflight.fetch_add(1);
  }
  RegionPin(RegionPin&& o) noexcept : region_(std::move(o.region_)) {}
  RegionPin& operator=(RegionPin&& o) noexcept {
    Reset();
    region_ = std::move(o.region_);
    return *this;
  }
  ~RegionPin() { Reset(); }
  void Reset() {
    if (region_) region_->inflight.fetch_sub(1);
    region_.reset();
  }
  const std::shared_ptr<Region>& region() const { return region_; }
  // True when the region faulted (see Region::fault_flag): a request that
  // holds this pin must fail even if its kernel returned OK.
  bool faulted() const { return region_ && region_->faulted(); }

 private:
  std::shared_ptr<Region> region_;
};

}  // namespace kerneld::server
