// Standard headers for NVRTC, which ships none: each maps std:: onto
// libcu++ (cuda::std::, in the toolkit's include/cccl or include), whose
// headers NVRTC compiles. Only what device code may use; host-only headers
// (<algorithm>'s std::clamp, <map>, <mutex>) stay behind the kernels'
// #ifndef __CUDACC_RTC__ guards, and <algorithm> itself is empty here so
// that the guarded code's include line needs no guard of its own.
#include "jit/source_tree.h"

namespace kerneld::server::jit {

namespace {

std::string Forward(const std::string& name) {
  return "#pragma once\n#include <cuda/std/" + name +
         ">\nnamespace std {\nusing namespace cuda::std;\n}\n";
}

}  // namespace

const std::map<std::string, std::string>& StdShims() {
  static const auto* shims = [] {
    auto* m = new std::map<std::string, std::string>();
    for (const char* h : {"cstdint", "cstddef", "climits", "cfloat", "cmath", "limits",
                          "type_traits", "utility", "tuple", "initializer_list", "array"})
      (*m)[h] = Forward(h);
    (*m)["algorithm"] = "#pragma once\n// host-only in the kernels (std::min, std::clamp)\n";
    // NVRTC declares the math functions (expf, erff, ...) itself.
    (*m)["math.h"] = "#pragma once\n// NVRTC's built-in math functions\n";
    return m;
  }();
  return *shims;
}

}  // namespace kerneld::server::jit
