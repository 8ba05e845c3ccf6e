// What an impl needs from a device and a request, said and checked.
#include "kerneld/requirements.h"

#include "kerneld/schema.h"

namespace kerneld {

std::string Requirements::Describe() const {
  std::string s(DeviceKindName(device_kind));
  auto cc = [](int v) { return std::to_string(v / 10) + "." + std::to_string(v % 10); };
  if (device_kind == DeviceKind::kCuda && min_compute_capability > 0)
    s += ", compute capability >= " + cc(min_compute_capability);
  if (max_compute_capability != std::numeric_limits<int>::max())
    s += ", compute capability <= " + cc(max_compute_capability);
  if (!(dtypes == DTypeSet::All())) s += ", dtypes " + dtypes.ToString();
  if (alignment > 1) s += ", " + std::to_string(alignment) + "-byte aligned";
  if (!predicate_doc.empty()) s += ", " + predicate_doc;
  return s;
}

std::optional<std::string> Requirements::RejectDevice(const DeviceInfo& dev) const {
  auto cc = [](int v) { return std::to_string(v / 10) + "." + std::to_string(v % 10); };
  if (dev.device.kind != device_kind) {
    return "needs a " + std::string(DeviceKindName(device_kind)) + " device; " +
           dev.device.ToString() + " is " + std::string(DeviceKindName(dev.device.kind));
  }
  if (device_kind == DeviceKind::kCuda) {
    if (dev.compute_capability < min_compute_capability)
      return "needs compute capability >= " + cc(min_compute_capability) + "; " +
             dev.device.ToString() + " is " + cc(dev.compute_capability);
    if (dev.compute_capability > max_compute_capability)
      return "needs compute capability <= " + cc(max_compute_capability) + "; " +
             dev.device.ToString() + " is " + cc(dev.compute_capability);
  }
  if (!dev.healthy) return dev.device.ToString() + " is unhealthy";
  return std::nullopt;
}

bool Requirements::AcceptsDevice(const DeviceInfo& dev) const {
  if (dev.device.kind != device_kind) return false;
  if (device_kind == DeviceKind::kCuda && (dev.compute_capability < min_compute_capability ||
                                           dev.compute_capability > max_compute_capability))
    return false;
  return dev.healthy;
}

std::optional<std::string> Requirements::RejectRequest(const KernelContext& ctx,
                                                       const DeviceInfo* staged_on) const {
  const bool staged = staged_on != nullptr && staged_on->device.is_cuda();
  // A host view staged on a GPU starts on a fresh 256-byte boundary.
  auto align_of = [&](const TensorView& t) {
    return staged && t.device.is_cpu() ? 256 : t.alignment();
  };
  // The input's name is formatted only for a refusal: this runs twice on
  // every request's success path (the scheduler, then the call).
  auto check = [&](const TensorView& t, size_t i) -> std::optional<std::string> {
    auto what = [&] { return "input '" + ctx.op->inputs[i].name + "'"; };
    if (!dtypes.Contains(t.dtype))
      return what() + " dtype " + std::string(DTypeName(t.dtype)) + " not in " + dtypes.ToString();
    if (alignment > 1 && align_of(t) < alignment)
      return what() + " is " + std::to_string(align_of(t)) + "-byte aligned; needs " +
             std::to_string(alignment);
    return std::nullopt;
  };
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].data == nullptr && ctx.inputs[i].numel() == 0) continue;
    if (auto r = check(ctx.inputs[i], i)) return r;
  }
  // Output dtypes may differ from inputs (softmax -> float32); only check
  // alignment on them.
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const TensorView& t = ctx.outputs[i];
    if (t.data == nullptr) continue;
    if (alignment > 1 && align_of(t) < alignment)
      return "output '" + ctx.op->outputs[i].name + "' is " + std::to_string(align_of(t)) +
             "-byte aligned; needs " + std::to_string(alignment);
  }
  if (predicate) return predicate(ctx);
  return std::nullopt;
}

}  // namespace kerneld
