// What an implementation needs from a device and a request: the scheduler
// places a request only where its impl's requirements accept both, and
// Call (kerneld/call.h) refuses a request they do not.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "kerneld/context.h"
#include "kerneld/dtype.h"
#include "kerneld/tensor.h"

namespace kerneld {

// What an implementation needs from a device and a request.
struct Requirements {
  DeviceKind device_kind = DeviceKind::kCpu;
  int min_compute_capability = 0;
  int max_compute_capability = std::numeric_limits<int>::max();
  // Every input's dtype (outputs may differ), and the alignment in bytes of
  // every tensor's first element: a request outside them runs elsewhere.
  DTypeSet dtypes = DTypeSet::All();
  int alignment = 1;
  // Extra predicate over the request: returns a reason when it cannot run it.
  std::function<std::optional<std::string>(const KernelContext&)> predicate;
  std::string predicate_doc;

  static Requirements Cpu() { return {}; }
  static Requirements Cuda(int min_cc = 70) {
    Requirements r;
    r.device_kind = DeviceKind::kCuda;
    r.min_compute_capability = min_cc;
    return r;
  }
  Requirements& When(std::string doc,
                     std::function<std::optional<std::string>(const KernelContext&)> p) {
    predicate_doc = std::move(doc);
    predicate = std::move(p);
    return *this;
  }

  // Human-readable: "cuda, compute capability >= 8.0, 16-byte aligned".
  std::string Describe() const;
  // nullopt when the device can host this impl at all (request-independent).
  std::optional<std::string> RejectDevice(const DeviceInfo& dev) const;
  // !RejectDevice(dev), without formatting the reason: the scheduler asks
  // it of every device on every request, and on a GPU host the CPU impls
  // are refused by every GPU (building that message cost each request
  // several allocations).
  bool AcceptsDevice(const DeviceInfo& dev) const;
  // nullopt when this request can run (device assumed eligible). With
  // `staged_on` a CUDA device, views in host memory are judged as the worker
  // will stage them there (fresh 256-byte aligned device memory): the
  // scheduler asks before staging, on the request's own views, with no copy.
  std::optional<std::string> RejectRequest(const KernelContext& ctx,
                                           const DeviceInfo* staged_on = nullptr) const;
};

}  // namespace kerneld
