// Who is calling, and what that principal may hold (docs/security.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "auth/principal.h"

namespace kerneld::server {

enum class Role { kUser, kAdmin };

// Per-principal limits; 0 means no limit.
struct Quota {
  int64_t max_bytes = 0;     // bytes registered + allocated
  int64_t max_buffers = 0;   // buffers held at once
  int64_t max_inflight = 0;  // requests in flight
};

class PrincipalState;  // principal_stats.h

struct Identity {
  Principal principal = kAnonymous;
  Role role = Role::kUser;
  // How the principal was established; kNone: anonymous, no identity at all.
  enum class Source { kNone, kToken, kCertificate, kPeerUid };
  Source source = Source::kNone;
  // The uid whose rights bound what the daemon opens on the caller's behalf
  // (shared memory): the token file's uid=, else the unix-socket peer's.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;  // the unix-socket peer's primary group
  Quota quota;
  bool admin() const { return role == Role::kAdmin; }
  bool anonymous() const { return source == Source::kNone; }
};

}  // namespace kerneld::server
