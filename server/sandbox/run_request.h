// A kRun frame's payload: the module (its cache key and CUBIN, loaded once
// per worker), the kernel's symbol, the launch, the request's memory as one
// CUDA IPC handle (the daemon's staging arena, mapped for this request only)
// and the kernel's arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/protocol.h"

namespace kerneld::server::sandbox {

struct RunArg {
  enum Kind : uint32_t { kPointer = 0, kInt64 = 1, kFloat = 2, kBool = 3 } kind = kPointer;
  uint64_t offset = 0;  // kPointer: bytes into the mapped arena
  int64_t i = 0;
  float f = 0;
  bool b = false;
};

struct RunRequest {
  std::string key, cubin, symbol;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared_bytes = 0;
  std::string ipc_handle;  // 64 bytes (cudaIpcMemHandle_t); empty: no memory
  uint64_t arena_bytes = 0;
  std::vector<RunArg> args;

  std::string Encode() const;
  // False on a malformed payload (the worker trusts the daemon, but checks).
  bool Decode(std::string_view payload);
};

}  // namespace kerneld::server::sandbox
