// libnvrtc, loaded at run time with dlopen.
//
// NVRTC is part of the CUDA toolkit and of the CUDA runtime images; at about
// 109 MB it is too big to bundle, and a daemon without it must still start
// (the nvrtc backend is then ineligible, with the reason LoadNvrtc gives).
// So nothing links it: its entry points are resolved with dlsym, and this
// header declares their types itself (nvrtc.h is not needed to build).
#pragma once

#include <cstddef>
#include <string>

namespace kerneld::server::jit {

// The library's C API (nvrtc.h), with nvrtcResult as int (0: success).
struct NvrtcApi {
  using Program = struct NvrtcProgramImpl*;
  int (*version)(int* major, int* minor) = nullptr;
  int (*create_program)(Program* prog, const char* src, const char* name, int num_headers,
                        const char* const* headers, const char* const* include_names) = nullptr;
  int (*destroy_program)(Program* prog) = nullptr;
  int (*compile_program)(Program prog, int num_options, const char* const* options) = nullptr;
  int (*get_cubin_size)(Program prog, size_t* size) = nullptr;
  int (*get_cubin)(Program prog, char* cubin) = nullptr;
  int (*get_program_log_size)(Program prog, size_t* size) = nullptr;
  int (*get_program_log)(Program prog, char* log) = nullptr;
  int (*add_name_expression)(Program prog, const char* name_expression) = nullptr;
  int (*get_lowered_name)(Program prog, const char* name_expression,
                          const char** lowered_name) = nullptr;
  const char* (*get_error_string)(int result) = nullptr;
  int (*get_num_supported_archs)(int* num_archs) = nullptr;
  int (*get_supported_archs)(int* archs) = nullptr;

  int major = 0, minor = 0;  // nvrtcVersion
  std::string library;       // the file loaded (resolved path)
  // The CUDA toolkit's include directories for the kernels' <cuda_runtime.h>,
  // <cuda_fp16.h>, ... and libcu++ (<cuda/std/...>); empty when none was
  // found (a compile then fails with NVRTC's "cannot open source file").
  std::string toolkit_include, cccl_include;

  std::string VersionString() const { return std::to_string(major) + "." + std::to_string(minor); }
  // "NVRTC_ERROR_COMPILATION (6)"
  std::string ErrorName(int result) const;
  // Whether NVRTC can make a CUBIN for sm_<cc> (cc = 90 for sm_90).
  bool SupportsArch(int cc) const;
};

// The environment variable that names the library to load instead of the
// search below.
inline constexpr const char* kNvrtcLibraryEnv = "KERNELD_NVRTC_LIBRARY";

// Loads libnvrtc once per process and resolves its API. `path` (or, when
// empty, $KERNELD_NVRTC_LIBRARY) names the file; else libnvrtc.so.13,
// libnvrtc.so.12 and libnvrtc.so are tried on the loader path, then in
// $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64. Returns
// nullptr and sets *why ("libnvrtc not found: ...", or which symbol is
// missing) when it cannot. Thread-safe; the library is never unloaded.
const NvrtcApi* LoadNvrtc(const std::string& path, std::string* why);

// The toolkit include directory for a loaded library: the `include`
// directory beside (or above) its lib directory, else $CUDA_HOME,
// $CUDA_PATH, /usr/local/cuda. Exposed for tests.
std::string FindToolkitInclude(const std::string& library_path);

}  // namespace kerneld::server::jit
