// NVRTC for a client's CUDA source (a user kernel): the source as sent plus
// compile-time checks of the entry's parameters (kernel_spec.h), for one
// exact architecture, through the JIT's disk cache (the key hashes the
// program, the options, the arch and NVRTC's version, as docs/jit.md says).
// ptxas reports the kernel's registers, shared memory and spills.
//
// The program may include toolkit headers only (<cuda_fp16.h>, <cuda/std/...>):
// a quoted or absolute include, or one built from a macro, is refused before
// NVRTC runs, so a compile never reads the daemon's files.
#pragma once

#include <string>
#include <vector>

#include "jit/compiler.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc_loader.h"
#include "kerneld/v1/kerneld.pb.h"
#include "sandbox/kernel_spec.h"

namespace kerneld::server::sandbox {

inline constexpr size_t kMaxLogBytes = 16 * 1024;  // the compile log a response carries

struct CompiledUserKernel {
  std::string arch, key;
  jit::CompiledModule module;  // the CUBIN and each instantiation's symbol
  std::vector<v1::KernelResources> resources;
  std::string log;  // NVRTC's, cut to kMaxLogBytes
  bool cache_hit = false;
  double seconds = 0;
};

// Refuses a source whose #include lines name anything but a toolkit header
// by <name> (no "..", not absolute), and #embed / #import.
Status CheckIncludes(const std::string& source);

// The ptxas lines of a log (-Xptxas -v) as resources per function; the
// function names are the lowered names, mapped back to `symbols`'s
// name expressions where they match.
std::vector<v1::KernelResources> ParsePtxasInfo(
    const std::string& log, const std::string& arch,
    const std::vector<std::pair<std::string, std::string>>& symbols);

// Compiles `source` for `arch`. `cache` may be null or off. A compile
// error is INVALID_ARGUMENT carrying the head of NVRTC's log (the status
// message is bounded); *out->log has up to kMaxLogBytes of it either way.
Status CompileUserKernel(const jit::NvrtcApi& nvrtc, jit::DiskCache* cache,
                         const UserKernelSpec& spec, const std::string& source,
                         const std::string& arch, CompiledUserKernel* out);

// A log cut to `max` bytes at a line end, marked when cut.
std::string CutLog(const std::string& log, size_t max);

}  // namespace kerneld::server::sandbox
