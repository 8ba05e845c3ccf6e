// One JIT cache file: a header with a checksum, then the module.
//
//   "KDJIT01\n"            8 bytes, the format
//   payload size           8 bytes, little-endian
//   SHA-256 of payload     32 bytes
//   payload: the key (64 hex digits), the symbol count, each name
//            expression and its lowered name, the CUBIN; each string
//            length-prefixed (8 bytes, little-endian)
//
// A file cut short, with a flipped bit, of another key or of another format
// fails ParseEntry and is rebuilt, never loaded.
#pragma once

#include <string>
#include <string_view>

#include "jit/compiler.h"

namespace kerneld::server::jit {

std::string SerializeEntry(const std::string& key, const CompiledModule& module);

// false, with *why, when `bytes` is not a whole, intact entry for `key`.
bool ParseEntry(std::string_view bytes, const std::string& key, CompiledModule* out,
                std::string* why);

}  // namespace kerneld::server::jit
