#include "kerneld/tensor.h"

#include <cstdint>

namespace kerneld {

std::string_view DeviceKindName(DeviceKind k) { return k == DeviceKind::kCuda ? "cuda" : "cpu"; }

std::string Device::ToString() const {
  if (kind == DeviceKind::kCpu) return "cpu";
  return "cuda:" + std::to_string(index);
}

std::string ShapeToString(const Shape& s) {
  // Shapes come from clients and land in error messages: a 100,000-dim shape
  // must not make a 1 MB message (gRPC's 8 KiB metadata limit).
  constexpr size_t kShown = 8;
  std::string out = "[";
  for (size_t i = 0; i < s.size() && i < kShown; ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.size() > kShown) out += ", … (" + std::to_string(s.size()) + " dims)";
  return out + "]";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int TensorView::alignment() const {
  auto addr = reinterpret_cast<uintptr_t>(raw());
  if (addr == 0) return 256;
  int a = 1;
  while (a < 256 && (addr & static_cast<uintptr_t>(a)) == 0) a <<= 1;
  return a;
}

bool TensorView::Overlaps(const TensorView& o) const {
  if (!(device == o.device)) return false;
  auto a0 = reinterpret_cast<uintptr_t>(raw());
  auto b0 = reinterpret_cast<uintptr_t>(o.raw());
  auto a1 = a0 + static_cast<uintptr_t>(nbytes());
  auto b1 = b0 + static_cast<uintptr_t>(o.nbytes());
  return a0 < b1 && b0 < a1;
}

}  // namespace kerneld
