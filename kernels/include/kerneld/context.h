// The kernel context: one request as an implementation sees it, and the one
// form a request keeps from validation (kerneld/call.h) through the
// scheduler to the worker that runs it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kerneld/attr.h"
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

  const TensorView& input(std::string_view n) const;
  TensorView& output(std::string_view n);

  double attr_f(std::string_view n) const;
  int64_t attr_i(std::string_view n) const;
  bool attr_b(std::string_view n) const;
  const std::string& attr_s(std::string_view n) const;
};

}  // namespace kerneld
