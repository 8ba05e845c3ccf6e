#include "jit/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace kerneld::server::jit {

namespace {

// cuda.h: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
constexpr int kAttrCcMajor = 75;
constexpr int kAttrCcMinor = 76;

template <typename F>
void Resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

}  // namespace

std::string CudaDriverApi::ErrorName(int result) const {
  const char* s = nullptr;
  if (get_error_string == nullptr || get_error_string(result, &s) != 0 || s == nullptr)
    s = "CUDA driver error";
  return std::string(s) + " (" + std::to_string(result) + ")";
}

const CudaDriverApi* LoadCudaDriver(std::string* why) {
  static std::once_flag once;
  static const CudaDriverApi* loaded = nullptr;
  static std::string error;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      error = std::string("libcuda.so.1 not found (no NVIDIA driver on this machine): ") +
              (e ? e : "dlopen failed");
      return;
    }
    auto* api = new CudaDriverApi();  // never freed: the driver stays loaded
    std::string missing;
    Resolve(lib, "cuInit", &api->init, &missing);
    Resolve(lib, "cuDeviceGet", &api->device_get, &missing);
    Resolve(lib, "cuDeviceGetAttribute", &api->device_get_attribute, &missing);
    Resolve(lib, "cuDevicePrimaryCtxRetain", &api->primary_ctx_retain, &missing);
    Resolve(lib, "cuDevicePrimaryCtxRelease_v2", &api->primary_ctx_release, &missing);
    Resolve(lib, "cuCtxPushCurrent_v2", &api->ctx_push_current, &missing);
    Resolve(lib, "cuCtxPopCurrent_v2", &api->ctx_pop_current, &missing);
    Resolve(lib, "cuModuleLoadData", &api->module_load_data, &missing);
    Resolve(lib, "cuModuleUnload", &api->module_unload, &missing);
    Resolve(lib, "cuModuleGetFunction", &api->module_get_function, &missing);
    Resolve(lib, "cuGetErrorString", &api->get_error_string, &missing);
    Resolve(lib, "cuLaunchKernel", &api->launch_kernel, &missing);
    Resolve(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor", &api->occupancy_max_active_blocks,
            &missing);
    std::string optional;  // cluster launches: refused when absent
    Resolve(lib, "cuLaunchKernelEx", &api->launch_kernel_ex, &optional);
    Resolve(lib, "cuFuncSetAttribute", &api->func_set_attribute, &optional);
    if (!missing.empty()) {
      error = "libcuda.so.1 lacks " + missing;
      delete api;
      return;
    }
    if (int r = api->init(0); r != 0) {
      error = "cuInit: " + api->ErrorName(r);
      delete api;
      return;
    }
    loaded = api;
  });
  if (loaded == nullptr && why != nullptr) *why = error;
  return loaded;
}

std::string DeviceArch(const CudaDriverApi& api, int ordinal, std::string* why) {
  int dev = 0, major = 0, minor = 0;
  int r = api.device_get(&dev, ordinal);
  if (r == 0) r = api.device_get_attribute(&major, kAttrCcMajor, dev);
  if (r == 0) r = api.device_get_attribute(&minor, kAttrCcMinor, dev);
  if (r != 0) {
    *why = "device " + std::to_string(ordinal) + ": " + api.ErrorName(r);
    return "";
  }
  return "sm_" + std::to_string(major * 10 + minor);
}

Status LoadedModule::Load(const CudaDriverApi& api, int ordinal, const CompiledModule& compiled,
                          std::unique_ptr<LoadedModule>* out) {
  std::unique_ptr<LoadedModule> m(new LoadedModule());
  m->api_ = &api;
  int r = api.device_get(&m->device_, ordinal);
  if (r != 0) return InvalidArgument("device " + std::to_string(ordinal) + ": " + api.ErrorName(r));
  r = api.primary_ctx_retain(&m->ctx_, m->device_);
  if (r != 0) {
    m->ctx_ = nullptr;
    return Internal("cuDevicePrimaryCtxRetain: " + api.ErrorName(r));
  }
  if ((r = api.ctx_push_current(m->ctx_)) != 0)
    return Internal("cuCtxPushCurrent: " + api.ErrorName(r));
  r = api.module_load_data(&m->module_, compiled.cubin.data());
  CudaDriverApi::Context popped = nullptr;
  api.ctx_pop_current(&popped);
  if (r != 0) {
    m->module_ = nullptr;
    // A CUBIN for another architecture: NO_BINARY_FOR_GPU.
    return FailedPrecondition("cuModuleLoadData: " + api.ErrorName(r));
  }
  m->compiled_ = compiled;
  *out = std::move(m);
  return Status::Ok();
}

CudaDriverApi::Function LoadedModule::Find(const std::string& name_expression,
                                           std::string* why) const {
  const std::string sym = compiled_.Symbol(name_expression);
  if (sym.empty()) {
    *why = "the module was not compiled with " + Quote(name_expression);
    return nullptr;
  }
  CudaDriverApi::Function fn = nullptr;
  if (int r = api_->module_get_function(&fn, module_, sym.c_str()); r != 0) {
    *why = "cuModuleGetFunction(" + sym + "): " + api_->ErrorName(r);
    return nullptr;
  }
  return fn;
}

LoadedModule::~LoadedModule() {
  if (api_ == nullptr || ctx_ == nullptr) return;
  if (module_ != nullptr && api_->ctx_push_current(ctx_) == 0) {
    api_->module_unload(module_);
    CudaDriverApi::Context popped = nullptr;
    api_->ctx_pop_current(&popped);
  }
  api_->primary_ctx_release(device_);
}

}  // namespace kerneld::server::jit
