// The uid behind a TCP connection from this machine, and whether a uid may
// open a file: what "the client could open it itself" means for shared
// memory (no confused deputy; docs/security.md).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"

namespace kerneld::server {

// For a gRPC peer "ipv4:127.0.0.1:40000" or "ipv6:[::1]:40000": the uid that
// owns the client's end, found in /proc/net/tcp{,6} (the connection whose
// local end is the peer's address and whose remote port is one of
// `server_ports`). nullopt for a peer on another machine, in another
// network namespace, or when /proc is unavailable.
std::optional<uid_t> LocalTcpPeerUid(absl::string_view peer, const std::vector<int>& server_ports);

// The same lookup over a /proc/net/tcp-format text (exposed for tests).
std::optional<uid_t> FindUidInProcNetTcp(absl::string_view table, const std::string& local_hex,
                                         const std::vector<int>& server_ports);
// "ipv4:127.0.0.1:40000" -> "0100007F:9C40" (the kernel's notation); "" if
// it is not an IP peer. *v6 says which table to read.
std::string ProcNetAddress(absl::string_view peer, bool* v6);

// Whether `uid` (primary group `gid`, if known) may open an object with
// owner/mode `st` for reading and writing under the classic permission
// bits: owner bits if it owns it, group bits if in its group (primary or
// supplementary), other bits otherwise. Root may. "" or the reason.
std::string MayReadWrite(const struct stat& st, std::optional<uid_t> uid, std::optional<gid_t> gid);

}  // namespace kerneld::server
