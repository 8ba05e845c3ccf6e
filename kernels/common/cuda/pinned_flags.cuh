// Page-locked, mapped ints for the flags a binding reads from the device
// (the attention ops' index check): a kernel writes one directly (the same
// pointer on the device, with unified addressing), so reading it takes no
// copy, only the wait for the stream, which a caller that defers the check
// (KernelContext::defer_checks) does with the rest of its work. A
// process-wide free list, grown a page of ints at a time and never shrunk:
// there are as many flags as calls in flight.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

namespace kerneld::cuda {

class PinnedFlags {
 public:
  // A flag (host and device pointer alike), or nullptr when no mapped
  // pinned memory can be had.
  static int* Take() {
    std::lock_guard<std::mutex> lock(mu());
    std::vector<int*>& free = list();
    if (free.empty()) {
      constexpr int kPerPage = 1024;
      void* page = nullptr;
      void* on_device = nullptr;
      if (cudaHostAlloc(&page, kPerPage * sizeof(int),
                        cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      if (cudaHostGetDevicePointer(&on_device, page, 0) != cudaSuccess || on_device != page) {
        cudaGetLastError();  // no unified addressing: the caller copies instead
        cudaFreeHost(page);
        return nullptr;
      }
      for (int i = 0; i < kPerPage; ++i) free.push_back(static_cast<int*>(page) + i);
    }
    int* p = free.back();
    free.pop_back();
    return p;
  }
  // Back to the list: no kernel that writes p may still be in flight.
  static void Give(int* p) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu());
    list().push_back(p);
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<int*>& list() {
    static std::vector<int*>* l = new std::vector<int*>();  // outlives every thread
    return *l;
  }
};

}  // namespace kerneld::cuda
