// The kernel context: one request as an implementation sees it, and the one
// form a request keeps from validation (kerneld/call.h) through the
// scheduler to the worker that runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kerneld/attr.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld {

class ThreadPool;
struct OpDef;

// Everything an implementation sees: validated views, resolved attrs (with
// defaults filled in), the device and, on CUDA, the stream to launch on.
class KernelContext {
 public:
  const OpDef* op = nullptr;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  AttrMap attrs;
  DeviceInfo device;
  void* stream = nullptr;      // cudaStream_t on CUDA devices
  ThreadPool* pool = nullptr;  // CPU intra-op parallelism

  // A check whose answer is on the device until the stream's work is done
  // (the attention ops' index flag). With defer_checks false (the default)
  // an implementation waits for it and returns its status itself; a caller
  // that waits for the stream anyway sets defer_checks, and the impl then
  // leaves the check in `deferred` for the caller to run after that wait
  // (RunDeferred, kerneld/call.h), so the impl never synchronizes. A
  // deferred check not run waits for the stream when it is destroyed.
  bool defer_checks = false;
  std::function<Status()> deferred;

  const TensorView& input(std::string_view n) const;
  TensorView& output(std::string_view n);

  double attr_f(std::string_view n) const;
  int64_t attr_i(std::string_view n) const;
  bool attr_b(std::string_view n) const;
  const std::string& attr_s(std::string_view n) const;
};

}  // namespace kerneld
