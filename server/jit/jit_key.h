// The JIT cache key: SHA-256 over everything that decides a compiled
// module's bytes.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kerneld::server::jit {

struct KeyParts {
  std::string program;                         // the source NVRTC compiles
  std::map<std::string, std::string> headers;  // every header it includes, as read
  std::vector<std::string> toolkit_headers;    // <...> names resolved in the toolkit
  std::vector<std::string> name_expressions;   // the kernels and their template arguments
  std::vector<std::string> options;            // compile options (not the -I paths)
  std::string arch;                            // "sm_90"
  std::string nvrtc_version;                   // "13.0"
  std::string toolkit_version;                 // CUDART_VERSION of the headers, "13000"
};

// 64 lowercase hex digits. Every field is length-prefixed and tagged, so no
// two different KeyParts give the same byte stream; a change in any field
// gives a new key.
std::string MakeKey(const KeyParts& parts);

}  // namespace kerneld::server::jit
