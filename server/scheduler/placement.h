// Placement by expected finish (docs/architecture.md, "Placement"): among
// the devices that can run a request, the one where it is expected to
// complete first,
//
//   finish(d) = wait(d) + latency_ns(d) + transfer_ns(d)
//   wait(d)   = 0                                                  if load(d) < threads(d)
//             = pending_ns(d) / load(d) x (load(d) - threads(d) + 1) / threads(d)  otherwise
//
// load: the tasks queued or running on d; pending_ns: the sum of their
// estimated latencies (each task carries its estimate), so pending / load
// is the mean task there, and the new one starts once load - threads + 1
// of them are done, `threads` at a time. latency_ns: this request's
// measured latency on d (the tuning table's, for the impl d would run; a
// device with no measurement is taken to be as fast as the mean of those
// with one); transfer_ns: its host bytes over the host-to-device rate (0 on
// the CPU). A device whose free memory (when known) minus the headroom
// cannot hold the request's staged bytes is skipped. Ties (nothing measured
// yet) go to the device with the fewest tasks per thread, then the first.
// A pure function of its inputs, so simulated devices test it.
#pragma once

#include <cstdint>

#include "absl/types/span.h"

namespace kerneld::server {

struct DeviceLoad {
  bool eligible = true;     // healthy, and accepts the impl and the request
  int threads = 1;          // tasks it runs at once
  int64_t pending_ns = 0;   // estimated work queued or running
  int load = 0;             // tasks queued or running
  int64_t latency_ns = 0;   // this request's measured latency there; 0: unknown
  int64_t transfer_ns = 0;  // moving its host tensors there
  int64_t free_bytes = -1;  // device memory free; -1: unknown (not checked)
  int64_t need_bytes = 0;   // device memory the request takes there (staging)
};

// Host-to-device staging rate assumed by transfer_ns: about PCIe 4 x16's
// measured pinned copy rate (bytes per ns = GB/s).
inline constexpr int64_t kHostToDeviceBytesPerNs = 20;
// Device memory kept free beyond a request's own.
inline constexpr int64_t kMemoryHeadroomBytes = int64_t{256} << 20;

// finish(d) with latency_ns as given (unknown counts as 0).
int64_t ExpectedFinishNs(const DeviceLoad& d);
// The index of the device to run on; -1 when none is eligible or has room.
int ChooseDevice(absl::Span<const DeviceLoad> devices);

}  // namespace kerneld::server
