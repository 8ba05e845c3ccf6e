// cuBLASLt, loaded with dlopen on first use rather than linked.
//
// Why: libcublasLt carries ~92 KiB of static TLS. Linked, it is loaded at
// start-up and its TLS is carved out of every thread's stack; libraries that
// start threads with small explicit stacks (civetweb, under the Prometheus
// exposer) then fail pthread_create with EINVAL. dlopen gives its TLS the
// dynamic model instead. It also lets the daemon start where cuBLAS is not
// installed: only the `cublas` gemm implementation becomes ineligible, and
// says why.
#pragma once

#include <cublasLt.h>

#include <string>

namespace kerneld::cuda {

struct CublasLtApi {
  decltype(&cublasLtCreate) Create = nullptr;
  decltype(&cublasLtDestroy) Destroy = nullptr;
  decltype(&cublasLtGetStatusName) GetStatusName = nullptr;
  decltype(&cublasLtGetStatusString) GetStatusString = nullptr;
  decltype(&cublasLtMatmul) Matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
};

// The loaded API, or nullptr with *error saying which library or symbol was
// missing. Loads once (thread-safe); the library stays loaded for the
// process's life.
const CublasLtApi* LoadCublasLt(std::string* error);

}  // namespace kerneld::cuda
