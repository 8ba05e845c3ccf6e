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

 private:
  std::shared_ptr<Region> region_;
};

}  // namespace kerneld::server
