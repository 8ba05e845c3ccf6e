// The backends the kernel library has sources for. A build without CUDA
// still knows the names "cuda" and "cublas", so a request that asks for one
// is told it is not available here (FAILED_PRECONDITION, with the reason)
// rather than that the name is unknown. A new backend adds its line here
// with its first impl.
#include "kerneld/registry.h"

namespace kerneld {

KERNELD_BACKEND(cpu);
KERNELD_BACKEND(cuda);
KERNELD_BACKEND(cublas);
KERNELD_BACKEND(nvrtc);  // ops/<op>/jit.cc: the same cuda.cuh compiled at run time

}  // namespace kerneld
