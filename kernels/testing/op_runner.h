// Test helper: run one op's implementation directly (no server) on host
// tensors through the daemon's own call path (kerneld/call.h): prepare,
// lay out poisoned outputs, call the impl. Used by unit tests (cpu) and gpu tests
// (cuda, via RunOnCuda in gpu_util.h).
#pragma once

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kerneld/call.h"
#include "kerneld/host_tensor.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"
#include "kerneld/thread_pool.h"

namespace kerneld::testing {

// Host bytes for one tensor, 64-byte aligned, with room for an offset.
struct HostBuffer {
  std::vector<char> storage;
  char* data = nullptr;
  size_t bytes = 0;
  explicit HostBuffer(size_t n, size_t misalign = 0) : storage(n + 128) {
    auto p = reinterpret_cast<uintptr_t>(storage.data());
    data = reinterpret_cast<char*>(((p + 63) & ~uintptr_t{63}) + misalign);
    bytes = n;
  }
};

// Fill pattern for outputs: NaN in float types, so an unwritten element fails
// any comparison.
inline void Poison(char* p, size_t n) { std::memset(p, 0xff, n); }

struct OpRun {
  Status status;
  HostTensors outputs;  // decoded outputs (in-place outputs included)
};

// `misalign` rounded up to the dtype's size: views stay naturally aligned
// (the library's contract, checked by ValidateInputs; the server refuses
// other references) but off every vector width the kernels prefer.
inline size_t NaturalMisalign(size_t misalign, DType dt) {
  const size_t item = ItemSize(dt);
  return (misalign + item - 1) / item * item;
}

// Runs `op` with `backend`'s implementation on the CPU. Outputs that are not
// in place are poisoned first. When `alias` names an output, it is written
// into its may_alias input's memory (in place).
inline OpRun RunOnCpu(const std::string& op_name, const HostTensors& inputs, const AttrMap& attrs,
                      const std::string& alias = "", size_t misalign = 0) {
  OpRun r;
  const OpDef* op = OpRegistry::Global().Find(op_name);
  if (!op) return {NotFound("no op " + op_name), {}};
  const ImplDef* impl = op->FindImpl("cpu");
  KernelContext ctx;
  ctx.device.device = Device::Cpu();
  ctx.pool = &ThreadPool::Default();
  r.status = PrepareAttrs(*op, attrs, &ctx);
  if (!r.status.ok()) return r;
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  ctx.inputs.resize(op->inputs.size());
  for (size_t i = 0; i < op->inputs.size(); ++i) {
    auto it = inputs.find(op->inputs[i].name);
    if (it == inputs.end()) continue;
    std::string bytes = Encode(it->second.dtype, it->second.values);
    bufs.push_back(
        std::make_unique<HostBuffer>(bytes.size(), NaturalMisalign(misalign, it->second.dtype)));
    std::memcpy(bufs.back()->data, bytes.data(), bytes.size());
    TensorView& v = ctx.inputs[i];
    v.data = bufs.back()->data;
    v.dtype = it->second.dtype;
    v.shape = it->second.shape;
  }
  std::vector<OutputSpec> specs;
  r.status = PrepareInputs(ctx, &specs);
  if (!r.status.ok()) return r;
  r.status = LayOutOutputs(
      specs, alias,
      [&](const OutputSpec& spec, int64_t bytes) {
        bufs.push_back(std::make_unique<HostBuffer>(static_cast<size_t>(bytes),
                                                    NaturalMisalign(misalign, spec.dtype)));
        Poison(bufs.back()->data, bufs.back()->bytes);
        return static_cast<void*>(bufs.back()->data);
      },
      &ctx);
  if (!r.status.ok()) return r;
  r.status = Call(*impl, ctx);
  if (!r.status.ok()) return r;
  for (size_t i = 0; i < op->outputs.size(); ++i) {
    const TensorView& v = ctx.outputs[i];
    HostTensor t;
    t.dtype = v.dtype;
    t.shape = v.shape;
    Decode(v.dtype, std::string(static_cast<const char*>(v.raw()), static_cast<size_t>(v.nbytes())),
           &t.values);
    r.outputs[op->outputs[i].name] = std::move(t);
  }
  return r;
}

// Asserts every output matches the float64 reference within the dtype's
// tolerance (or the given override). Returns a description of the first
// failure, or "" when all match.
inline std::string CheckAgainstReference(const std::string& op, const HostTensors& inputs,
                                         const AttrMap& attrs, const HostTensors& got,
                                         double rtol_override = -1, double atol_override = -1) {
  HostTensors ref;
  std::string err;
  if (!Reference(op, inputs, attrs, &ref, &err)) return err;
  for (const auto& [name, want] : ref) {
    auto it = got.find(name);
    if (it == got.end()) return "missing output " + name;
    double rtol, atol;
    Tolerance(it->second.dtype, &rtol, &atol);
    if (rtol_override >= 0) rtol = rtol_override;
    if (atol_override >= 0) atol = atol_override;
    auto c = Compare(it->second.values, want.values, rtol, atol);
    if (c.mismatches) {
      auto i = static_cast<size_t>(c.first_bad);
      return name + ": " + std::to_string(c.mismatches) + " of " +
             std::to_string(want.values.size()) + " elements off (first at " + std::to_string(i) +
             ": got " + std::to_string(i < it->second.values.size() ? it->second.values[i] : NAN) +
             ", want " + std::to_string(want.values[i]) + "; max abs err " +
             std::to_string(c.max_abs_err) + ")";
    }
  }
  return "";
}

inline const std::vector<DType>& FloatTypes() {
  static const std::vector<DType> v = {DType::kFloat16, DType::kBFloat16, DType::kFloat32};
  return v;
}

}  // namespace kerneld::testing
