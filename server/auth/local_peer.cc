#include "auth/local_peer.h"

#include <grp.h>
#include <pwd.h>

#include <cstdio>
#include <vector>

namespace kerneld::server {

namespace {

// Whether `uid` belongs to group `g` through its supplementary groups.
bool InSupplementaryGroup(uid_t uid, gid_t g) {
  passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return false;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (groups[static_cast<size_t>(i)] == g) return true;
  return false;
}

}  // namespace

std::string MayReadWrite(const struct stat& st, std::optional<uid_t> uid,
                         std::optional<gid_t> gid) {
  const mode_t m = st.st_mode;
  const char* whose;
  bool ok;
  if (uid && *uid == 0) return "";
  if (uid && *uid == st.st_uid) {
    whose = "owner";
    ok = (m & S_IRUSR) && (m & S_IWUSR);
  } else if (uid && ((gid && *gid == st.st_gid) || InSupplementaryGroup(*uid, st.st_gid))) {
    whose = "group";
    ok = (m & S_IRGRP) && (m & S_IWGRP);
  } else {
    whose = "other";
    ok = (m & S_IROTH) && (m & S_IWOTH);
  }
  if (ok) return "";
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(m & 07777));
  std::string why = (uid ? "uid " + std::to_string(*uid) : std::string("this caller")) +
                    " may not open it read-write itself (owner uid " + std::to_string(st.st_uid) +
                    ", group " + std::to_string(st.st_gid) + ", mode " + mode + "; the " + whose +
                    " bits apply)";
  if (!uid)
    why +=
        ": a caller without a verified uid (TCP without a token that names uid=) may register "
        "only objects every user may read and write; connect over kerneld's unix socket, or "
        "use a token with uid=";
  return why;
}

}  // namespace kerneld::server
