// Who is asking: a principal's name, and the principal whose quotas it
// counts against. Names per source of identity: auth/principal_name.h; the
// rest of an identity (role, uid, quotas): auth/identity.h.
#pragma once

#include <string>
#include <string_view>

namespace kerneld::server {

// A principal: who is asking. With no authentication configured every
// client is the same principal; the buffer registry never assumes that.
using Principal = std::string;
inline constexpr char kAnonymous[] = "anonymous";
// A plaintext TCP connection without a token, under
// --anonymous_buffers=connection: "conn:SERIAL" (auth/principal_name.h).
// Its buffers are its own and go when it closes (ReleaseOwner).
inline constexpr std::string_view kConnectionPrefix = "conn:";
inline bool IsConnectionPrincipal(std::string_view p) {
  return p.substr(0, 5) == kConnectionPrefix;
}
// The principal whose quotas (and rate) a principal's use counts against:
// itself, except that every anonymous connection counts against
// "anonymous", together, as when they were one principal; otherwise a
// caller would multiply its quota by opening connections.
inline std::string_view QuotaPrincipal(const Principal& p) {
  return IsConnectionPrincipal(p) ? std::string_view(kAnonymous) : std::string_view(p);
}

}  // namespace kerneld::server
