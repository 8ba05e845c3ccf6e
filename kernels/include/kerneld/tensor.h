// Devices and tensor views.
//
// TensorView mirrors DLPack's DLTensor (data, device, dtype, shape,
// byte_offset) so that a client's DLPack capsule maps onto it field by field.
// Views are contiguous row-major: the wire format has no strides and no
// kernel takes them, so DLTensor's strides field has no counterpart here (a
// strided client tensor is made contiguous before it is sent).
// A view never owns memory: the server's buffer layer keeps the region alive
// for the request's life.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kerneld/dtype.h"

namespace kerneld {

enum class DeviceKind : uint8_t { kCpu = 0, kCuda = 1 };

std::string_view DeviceKindName(DeviceKind k);

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // ordinal within kind; always 0 for the CPU

  static Device Cpu() { return {DeviceKind::kCpu, 0}; }
  static Device Cuda(int i) { return {DeviceKind::kCuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  bool operator==(const Device&) const = default;
  // "cpu" or "cuda:0"
  std::string ToString() const;
};

// What the scheduler knows about a device when it decides eligibility.
struct DeviceInfo {
  Device device;
  std::string uuid;  // "GPU-xxxxxxxx-..." for CUDA; "cpu" for the CPU
  std::string name;
  int compute_capability = 0;  // major*10 + minor; 0 for the CPU
  int sm_count = 0;
  int64_t total_memory = 0;
  int64_t l2_bytes = 0;
  bool healthy = true;
};

using Shape = std::vector<int64_t>;

// "[4, 4096]"; past 8 dims "[1, 2, …, … (100 dims)]" (it lands in messages).
std::string ShapeToString(const Shape& s);

// Element count of a shape; nullopt when a dim is negative or the product
// overflows int64 (the caller turns that into INVALID_ARGUMENT). Defined in
// size.cc beside the other checked arithmetic (kerneld/size.h).
std::optional<int64_t> CheckedNumel(const Shape& s);

struct TensorView {
  void* data = nullptr;  // base pointer; element 0 lives at data + byte_offset
  Device device;
  DType dtype = DType::kInvalid;
  Shape shape;  // contiguous, row-major
  int64_t byte_offset = 0;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  // Unchecked: valid on views that passed CheckTensorSize (kerneld/size.h),
  // which every view built from a request does before it gets here.
  int64_t numel() const;
  int64_t nbytes() const { return numel() * static_cast<int64_t>(ItemSize(dtype)); }
  int64_t dim(int64_t i) const {  // negative counts from the end
    return shape[static_cast<size_t>(i < 0 ? i + ndim() : i)];
  }
  template <typename T>
  T* ptr() const {
    return reinterpret_cast<T*>(static_cast<char*>(data) + byte_offset);
  }
  void* raw() const { return static_cast<char*>(data) + byte_offset; }
  // Address alignment of the first element in bytes (power of two, capped at 256).
  int alignment() const;
  // True when both views cover overlapping bytes.
  bool Overlaps(const TensorView& o) const;
  bool SameMemory(const TensorView& o) const { return raw() == o.raw() && nbytes() == o.nbytes(); }
};

}  // namespace kerneld
