// The kernel sources NVRTC compiles, and the closure of one header over its
// includes.
//
// The JIT backend compiles the same ops/<op>/cuda.cuh that nvcc compiled into
// this binary. The build embeds every .cuh and .h of kernels/common and
// kernels/ops into the daemon (embedded_sources.cc, generated), so an
// installed daemon needs no source tree and compiles exactly the revision it
// was built from. A directory can stand in for the embedded copy
// ($KERNELD_JIT_SOURCE_DIR, a kernels/ folder) to try a kernel edit without
// rebuilding the daemon.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kerneld/status.h"

namespace kerneld::server::jit {

inline constexpr const char* kSourceDirEnv = "KERNELD_JIT_SOURCE_DIR";

class SourceTree {
 public:
  // The headers built into this binary (names relative to kernels/:
  // "ops/rmsnorm/cuda.cuh", "common/cuda/rows.cuh").
  static const SourceTree& Embedded();
  // $KERNELD_JIT_SOURCE_DIR when set, else Embedded().
  static const SourceTree& Default();
  // Files read from `root` (a kernels/ folder) when asked for.
  static SourceTree Directory(std::string root);

  // The contents of `name`; false when the tree has no such file.
  bool Read(const std::string& name, std::string* contents) const;
  // "embedded" or the directory.
  std::string Describe() const { return root_.empty() ? "embedded" : root_; }
  size_t EmbeddedCount() const { return files_ ? files_->size() : 0; }

 private:
  const std::map<std::string, std::string>* files_ = nullptr;  // embedded
  std::string root_;                                           // or a directory
};

// Standard headers that NVRTC does not ship (<cstdint>, <type_traits>, ...),
// as small headers mapping std:: onto libcu++'s cuda::std:: (the headers a
// kernel's device code may use). Host-only standard headers are not here:
// a cuda.cuh guards its host code, and what it includes for it, with
// #ifndef __CUDACC_RTC__.
const std::map<std::string, std::string>& StdShims();

// One program's sources: its headers as read, in a fixed order, each
// exactly once.
struct SourceClosure {
  std::map<std::string, std::string> headers;  // include name -> contents
  std::vector<std::string> toolkit;            // <...> includes left to the CUDA toolkit
};

// `header` and every header it includes, transitively: each #include "x"
// and #include <x> that the tree or the shims hold (whether or not a guard
// excludes it: a file is hashed when it could be compiled). Other angle
// includes (<cuda_runtime.h>) are the toolkit's. NotFound when `header` is
// not in the tree; a quoted include the tree lacks is left to NVRTC, which
// reports it if it is compiled.
Status CollectSources(const SourceTree& tree, const std::string& header, SourceClosure* out);

}  // namespace kerneld::server::jit
