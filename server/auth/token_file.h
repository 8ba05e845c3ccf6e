// The --auth_tokens file: one token per line,
//
//   TOKEN PRINCIPAL ROLE [uid=N] [max_bytes=N[K|M|G]] [max_buffers=N] [max_inflight=N]
//
// ROLE is "user" or "admin"; '#' starts a comment; blank lines are skipped.
// Parsed whole or not at all: a reload with a mistake keeps the old table.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/strings/string_view.h"
#include "auth/identity.h"
#include "kerneld/status.h"

namespace kerneld::server {

struct TokenEntry {
  Principal principal;
  Role role = Role::kUser;
  std::optional<uid_t> uid;
  std::optional<int64_t> max_bytes, max_buffers, max_inflight;
};

using TokenTable = std::unordered_map<std::string, TokenEntry>;

// Bounds that keep a hostile or broken file from costing much.
inline constexpr size_t kMinTokenLength = 16;
inline constexpr size_t kMaxTokenLength = 512;
inline constexpr size_t kMaxPrincipalLength = 128;
inline constexpr size_t kMaxTokenFileBytes = 16 << 20;

// INVALID_ARGUMENT naming the line and what is wrong, or OK with *out filled.
Status ParseTokenFile(absl::string_view text, TokenTable* out);
// Reads `path` (bounded; a regular file only, opened without blocking) and
// parses it; the message names the path.
Status LoadTokenFile(const std::string& path, TokenTable* out);

}  // namespace kerneld::server
