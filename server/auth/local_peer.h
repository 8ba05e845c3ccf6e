// Whether a uid may open a file: what "the client could open it itself"
// means for shared memory (no confused deputy; docs/security.md). The uid
// comes only from the kernel's word for the connection (SO_PEERCRED on the
// unix socket) or from a token that names it: never from /proc/net/tcp,
// whose lines any local user can shape (a TIME_WAIT line reads uid 0).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>

namespace kerneld::server {

// Whether `uid` (primary group `gid`, if known) may open an object with
// owner/mode `st` for reading and writing under the classic permission
// bits: owner bits if it owns it, group bits if in its group (primary or
// supplementary), other bits otherwise. Root may. Without a uid only the
// other bits apply (an object anyone may open read-write). "" or the reason.
std::string MayReadWrite(const struct stat& st, std::optional<uid_t> uid, std::optional<gid_t> gid);

}  // namespace kerneld::server
