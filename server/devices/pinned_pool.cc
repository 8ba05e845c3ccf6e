#include "devices/pinned_pool.h"

#include <cuda_runtime.h>

namespace kerneld::server {

PinnedPool::~PinnedPool() {
  for (auto& [_, v] : free_)
    for (void* p : v) cudaFreeHost(p);
}

void* PinnedPool::Get(size_t bytes, size_t* capacity) {
  size_t cls = 4096;
  while (cls < bytes) cls <<= 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
      *capacity = cls;
      return p;
    }
  }
  void* p = nullptr;
  if (cudaMallocHost(&p, cls) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  *capacity = cls;
  return p;
}

void PinnedPool::Put(void* p, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + capacity <= max_cached_) {
      free_[capacity].push_back(p);
      cached_ += capacity;
      return;
    }
  }
  cudaFreeHost(p);
}

}  // namespace kerneld::server
