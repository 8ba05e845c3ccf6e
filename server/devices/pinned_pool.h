// Pooled page-locked host buffers for staging inline tensors. Blocks are
// kept by power-of-two size class and reused; cudaMallocHost is called only
// when a class has no free block (never once per request in steady state).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace kerneld::server {

class PinnedPool {
 public:
  explicit PinnedPool(size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}
  ~PinnedPool();
  // nullptr when page-locked memory cannot be had.
  void* Get(size_t bytes, size_t* capacity);
  void Put(void* p, size_t capacity);

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t max_cached_;
};

}  // namespace kerneld::server
