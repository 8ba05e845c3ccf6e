// token_file_fuzz: ParseTokenFile on fuzzed text. Checked: it never crashes
// or throws; a refusal says which line and never echoes a token; an
// accepted file yields entries within the parser's bounds (token and
// principal lengths, printable characters, a known role, counts >= 0).
#include <cstddef>
#include <cstdint>
#include <string>

#include "auth/token_file.h"

namespace {
bool Printable(const std::string& s) {
  for (char c : s)
    if (c <= ' ' || c > '~') return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kerneld::server;
  const std::string text(reinterpret_cast<const char*>(data), size);
  TokenTable table;
  const kerneld::Status st = ParseTokenFile(text, &table);
  if (!st.ok()) {
    if (st.message().find("--auth_tokens") == std::string::npos) __builtin_trap();
    if (!table.empty()) __builtin_trap();  // refused whole
    return 0;
  }
  for (const auto& [token, e] : table) {
    if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength || !Printable(token))
      __builtin_trap();
    if (e.principal.empty() || e.principal.size() > kMaxPrincipalLength ||
        !Printable(e.principal) || e.principal == kAnonymous)
      __builtin_trap();
    if (e.role != Role::kUser && e.role != Role::kAdmin) __builtin_trap();
    for (const auto& v : {e.max_bytes, e.max_buffers, e.max_inflight})
      if (v && *v < 0) __builtin_trap();
  }
  return 0;
}
