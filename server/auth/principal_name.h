// Principal names, one namespace per source of identity, so that no source
// can name a principal of another: "token:NAME" (the --auth_tokens file),
// "uid:N" (SO_PEERCRED on the unix socket), "x509:SUBJECT" or
// "x509:san:SAN" (a verified client certificate), "conn:SERIAL" (a
// plaintext TCP connection without a token, --anonymous_buffers=connection)
// and "anonymous" (every such caller, --anonymous_buffers=shared).
//
// A name is never cut into equality with another: a certificate's name is
// kept whole (escaped), and one whose escaped form is longer than
// kMaxWholeCertificateName becomes a shortened display form ending in "…"
// beside the SHA-256 of the whole name. A whole name has no raw byte above
// 0x7e (Sanitize escapes them) while a shortened one always holds "…", so
// the two forms cannot meet either.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "auth/principal.h"

namespace kerneld::server {

inline constexpr size_t kMaxWholeCertificateName = 256;

Principal TokenPrincipal(std::string_view name);
Principal UidPrincipal(uid_t uid);
// The connection's serial (auth/peer_listener.h): never reused while the
// daemon runs, so no later connection inherits a closed one's buffers.
Principal ConnectionPrincipal(uint64_t serial);
// `name` as gRPC reports it: the subject (RFC 2253, "CN=alice,O=team-a"),
// or, with `from_san`, the first subject alternative name.
Principal CertificatePrincipal(std::string_view name, bool from_san);

}  // namespace kerneld::server
