// The offline sweep's measurements (kerneld.v1.TuningService.Tune,
// `kernelctl tune`): one problem of an op made on one device, then each
// implementation the scheduler would choose among there timed as
// kernel_bench times it. GPU (tune_cuda.cc, kerneld/gpu_timing.h): inputs
// in device memory, three warm-up runs, then the median of `repeats` runs
// timed with CUDA events, each after an L2 read-flush. CPU (here,
// kerneld/wall_timing.h): the median of `repeats` wall-clock runs on the
// CPU worker's thread pool, no flush.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kerneld/host_tensor.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"
#include "scheduler/shape_bucket.h"

namespace kerneld::server {

struct TuneInput {
  DType dtype = DType::kFloat32;
  Shape shape;
  // An index input's values (kerneld/input_gen.h draws them); null: uniform
  // in [lo, hi) (integers: 0 to 7) from the problem's seed.
  const HostTensor* values = nullptr;
};

struct TuneProblemSpec {
  const OpDef* op = nullptr;
  std::vector<TuneInput> inputs;  // in the op's input order
  AttrMap attrs;
  double lo = -1, hi = 1;  // OpDef::bench's range
  uint64_t seed = 1;
  int repeats = 30;
};

struct ImplTiming {
  const ImplDef* impl = nullptr;
  int64_t median_ns = 0;  // 0 with error
  std::string error;      // the impl failed on this problem
};

struct TuneTiming {
  ShapeBucket bucket;  // the problem's, as a request of it is bucketed
  std::vector<ImplTiming> impls;
};

// The impls a device chooses among for `ctx` (Scheduler::PlaceFast's
// candidates on one device): of the device's kind, accepting it and the
// request, an nvrtc kernel still compiling left out; static rank order.
std::vector<const ImplDef*> TuneCandidates(const OpDef& op, const KernelContext& ctx,
                                           const DeviceInfo& device);

// `n` values of `dt` as bytes, uniform in [lo, hi) (integers: 0..7) from a
// hash of (index, seed): made a chunk at a time, so a large weight costs no
// float64 copy of itself.
std::string UniformBytes(DType dt, int64_t n, uint64_t seed, double lo, double hi);

// The problem on the CPU (host memory, `pool`), each candidate timed.
// An error: the problem could not be made (its inputs do not validate).
Status TimeOnCpu(const DeviceInfo& cpu, ThreadPool* pool, const TuneProblemSpec& p,
                 TuneTiming* out);
// The same on a GPU (tune_cuda.cc); without CUDA, FAILED_PRECONDITION.
Status TimeOnCuda(const DeviceInfo& gpu, const TuneProblemSpec& p, TuneTiming* out);

}  // namespace kerneld::server
