// NVRTC compiles an op's cuda.cuh (the header nvcc compiles for the AOT
// build) into a CUBIN for one exact architecture, instantiating the kernels
// the caller names with their template arguments.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jit/jit_key.h"
#include "jit/nvrtc_loader.h"
#include "jit/source_tree.h"
#include "kerneld/status.h"

namespace kerneld::server::jit {

// What to compile.
struct KernelSpec {
  std::string header;  // relative to kernels/: "ops/rmsnorm/cuda.cuh"
  // __global__ instantiations, as C++ name expressions with their template
  // arguments: "kerneld::cuda::rmsnorm::RmsNormKernel<__half, 8, 2>".
  // Structure (width, vector width, dtype, block shape) is a template
  // argument; runtime scalars (eps, factor) stay kernel arguments.
  std::vector<std::string> kernels;
  std::string arch;                  // exactly the device's: "sm_90", "sm_90a", "sm_100"
  std::vector<std::string> options;  // extra NVRTC options ("-DKERNELD_X=1")
};

// A compiled module: the CUBIN and each name expression's mangled symbol
// (what cuModuleGetFunction asks for).
struct CompiledModule {
  std::string cubin;
  std::vector<std::pair<std::string, std::string>> symbols;  // name expression -> lowered name
  // The symbol of a name expression; "" when it was not compiled.
  std::string Symbol(const std::string& name_expression) const;
};

// A program ready for NVRTC: its sources read once (what is hashed is what
// is compiled) and its key.
struct Program {
  KeyParts parts;
  std::vector<std::string> include_options;  // -I the toolkit (machine-specific: not in the key)
  std::string key;
};

// Options every program gets, as the AOT build compiles the same headers
// (CMAKE_CUDA_STANDARD 20).
const std::vector<std::string>& BaseOptions();

class Compiler {
 public:
  // `api` from LoadNvrtc; `tree` usually SourceTree::Default().
  Compiler(const NvrtcApi* api, const SourceTree* tree) : api_(api), tree_(tree) {}

  // Reads the sources and makes the key; compiles nothing (a cache hit
  // needs no more). InvalidArgument for a bad arch or an empty kernel list.
  Status Prepare(const KernelSpec& spec, Program* out) const;
  // Compiles with NVRTC. On a compile error the status carries the start of
  // NVRTC's log; *log (when given) gets all of it, warnings included.
  Status Compile(const Program& program, CompiledModule* out, std::string* log = nullptr) const;

  const NvrtcApi& api() const { return *api_; }

 private:
  const NvrtcApi* api_;
  const SourceTree* tree_;
};

// "sm_90" -> 90, "sm_90a" -> 90, "sm_100f" -> 100; -1 when not of that form.
int ArchComputeCapability(const std::string& arch);

}  // namespace kerneld::server::jit
