#include "ops/gemm/cublaslt_api.h"

#include <dlfcn.h>

#include <mutex>

namespace kerneld::cuda {

namespace {

struct Loaded {
  CublasLtApi api;
  std::string error;  // empty: api is complete
};

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* out, std::string* error) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && error->empty()) *error = std::string("libcublasLt lacks ") + name;
  return *out != nullptr;
}

Loaded Load() {
  Loaded l;
  // The soname of the toolkit we built against, then the toolkit's default
  // install path (the daemon may be started without LD_LIBRARY_PATH).
  const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = nullptr;
  std::string tried;
  for (const std::string& name : {soname, "/usr/local/cuda/lib64/" + soname}) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(e ? e : name.c_str());
  }
  if (!lib) {
    l.error =
        "cannot load cuBLASLt (" + tried + "); put the CUDA toolkit's lib64 on LD_LIBRARY_PATH";
    return l;
  }
  CublasLtApi& a = l.api;
  std::string* e = &l.error;
  Resolve(lib, "cublasLtCreate", &a.Create, e);
  Resolve(lib, "cublasLtDestroy", &a.Destroy, e);
  Resolve(lib, "cublasLtGetStatusName", &a.GetStatusName, e);
  Resolve(lib, "cublasLtGetStatusString", &a.GetStatusString, e);
  Resolve(lib, "cublasLtMatmul", &a.Matmul, e);
  Resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &a.MatmulAlgoGetHeuristic, e);
  Resolve(lib, "cublasLtMatmulDescCreate", &a.MatmulDescCreate, e);
  Resolve(lib, "cublasLtMatmulDescDestroy", &a.MatmulDescDestroy, e);
  Resolve(lib, "cublasLtMatmulDescSetAttribute", &a.MatmulDescSetAttribute, e);
  Resolve(lib, "cublasLtMatmulPreferenceCreate", &a.MatmulPreferenceCreate, e);
  Resolve(lib, "cublasLtMatmulPreferenceDestroy", &a.MatmulPreferenceDestroy, e);
  Resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &a.MatmulPreferenceSetAttribute, e);
  Resolve(lib, "cublasLtMatrixLayoutCreate", &a.MatrixLayoutCreate, e);
  Resolve(lib, "cublasLtMatrixLayoutDestroy", &a.MatrixLayoutDestroy, e);
  return l;
}

}  // namespace

const CublasLtApi* LoadCublasLt(std::string* error) {
  static const Loaded* loaded = new Loaded(Load());  // never freed: used until exit
  if (!loaded->error.empty()) {
    if (error) *error = loaded->error;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace kerneld::cuda
