// Loading a compiled module onto a GPU with the CUDA driver API, from
// libcuda.so.1 opened with dlopen: the JIT links no CUDA library, so it
// builds and its CPU-side tests run where CUDA is absent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "jit/compiler.h"
#include "kerneld/status.h"

namespace kerneld::server::jit {

// The few driver entry points the JIT needs (cuda.h's types as opaque
// pointers; CUresult as int, 0: success).
struct CudaDriverApi {
  using Context = struct CudaContextImpl*;
  using Module = struct CudaModuleImpl*;
  using Function = struct CudaFunctionImpl*;
  int (*init)(unsigned flags) = nullptr;
  int (*device_get)(int* device, int ordinal) = nullptr;
  int (*device_get_attribute)(int* value, int attribute, int device) = nullptr;
  int (*primary_ctx_retain)(Context* ctx, int device) = nullptr;
  int (*primary_ctx_release)(int device) = nullptr;
  int (*ctx_push_current)(Context ctx) = nullptr;
  int (*ctx_pop_current)(Context* ctx) = nullptr;
  int (*module_load_data)(Module* module, const void* image) = nullptr;
  int (*module_unload)(Module module) = nullptr;
  int (*module_get_function)(Function* fn, Module module, const char* name) = nullptr;
  int (*get_error_string)(int result, const char** str) = nullptr;
  // cuLaunchKernel; `stream` is a cudaStream_t / CUstream (the same handle).
  int (*launch_kernel)(Function fn, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                       unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                       void* stream, void** params, void** extra) = nullptr;
  // cuOccupancyMaxActiveBlocksPerMultiprocessor (persistent kernels' grids).
  int (*occupancy_max_active_blocks)(int* blocks, Function fn, int block_size,
                                     size_t shared_bytes) = nullptr;
  // cuLaunchKernelEx and cuFuncSetAttribute, for kernels launched as
  // thread-block clusters (split-row plans, sm_90+). Optional: nullptr on a
  // driver older than CUDA 12, where a cluster launch is refused.
  int (*launch_kernel_ex)(const struct LaunchConfig* config, Function fn, void** params,
                          void** extra) = nullptr;
  int (*func_set_attribute)(Function fn, int attribute, int value) = nullptr;

  std::string ErrorName(int result) const;
};

// cuda.h's CUlaunchAttribute holding a cluster dimension
// (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION): an id padded to 8 bytes, then
// the 64-byte CUlaunchAttributeValue union whose first member here is the
// cluster's x, y, z.
struct alignas(8) LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union Value {
    unsigned cluster_dim[3];
    char bytes[64];
  } value = {};
};
static_assert(sizeof(LaunchAttribute) == 72, "cuda.h's CUlaunchAttribute layout");

// cuda.h's CUlaunchConfig.
struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  void* stream = nullptr;
  LaunchAttribute* attrs = nullptr;
  unsigned num_attrs = 0;
};

inline constexpr int kLaunchAttributeClusterDimension = 4;       // CU_LAUNCH_ATTRIBUTE_...
inline constexpr int kFuncAttributeNonPortableClusterSize = 14;  // CU_FUNC_ATTRIBUTE_...

// libcuda.so.1 (the driver's, from the host), loaded once; nullptr with
// *why when it cannot be (no driver: a machine without a GPU).
const CudaDriverApi* LoadCudaDriver(std::string* why);

// "sm_90" for a device of compute capability 9.0; "" with *why on failure.
std::string DeviceArch(const CudaDriverApi& api, int ordinal, std::string* why);

// A module loaded into a device's primary context (the context the CUDA
// runtime uses, so its kernels launch on the daemon's streams). Unloaded
// when destroyed.
class LoadedModule {
 public:
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // The kernel of a name expression the module was compiled with; nullptr
  // and *why when it has none.
  CudaDriverApi::Function Find(const std::string& name_expression, std::string* why) const;

  static Status Load(const CudaDriverApi& api, int ordinal, const CompiledModule& compiled,
                     std::unique_ptr<LoadedModule>* out);

 private:
  LoadedModule() = default;
  const CudaDriverApi* api_ = nullptr;
  int device_ = -1;
  CudaDriverApi::Context ctx_ = nullptr;
  CudaDriverApi::Module module_ = nullptr;
  CompiledModule compiled_;
};

}  // namespace kerneld::server::jit
