#include "auth/local_peer.h"

#include <arpa/inet.h>
#include <grp.h>
#include <pwd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace kerneld::server {

std::string ProcNetAddress(absl::string_view peer, bool* v6) {
  std::string host;
  absl::string_view port;
  if (peer.rfind("ipv4:", 0) == 0) {
    peer.remove_prefix(5);
    const size_t colon = peer.rfind(':');
    if (colon == absl::string_view::npos) return "";
    host = std::string(peer.substr(0, colon));
    port = peer.substr(colon + 1);
    *v6 = false;
  } else if (peer.rfind("ipv6:[", 0) == 0) {
    peer.remove_prefix(6);
    const size_t close = peer.find("]:");
    if (close == absl::string_view::npos) return "";
    host = std::string(peer.substr(0, close));
    if (size_t pct = host.find('%'); pct != std::string::npos) host.resize(pct);  // zone id
    port = peer.substr(close + 2);
    *v6 = true;
  } else {
    return "";
  }
  int p = 0;
  if (!absl::SimpleAtoi(port, &p) || p <= 0 || p > 65535) return "";
  char out[64];
  if (!*v6) {
    in_addr a{};
    if (inet_pton(AF_INET, host.c_str(), &a) != 1) return "";
    std::snprintf(out, sizeof out, "%08X:%04X", a.s_addr, p);  // s_addr as the kernel prints it
  } else {
    in6_addr a{};
    if (inet_pton(AF_INET6, host.c_str(), &a) != 1) return "";
    uint32_t w[4];
    std::memcpy(w, &a, sizeof w);
    std::snprintf(out, sizeof out, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], p);
  }
  return out;
}

std::optional<uid_t> FindUidInProcNetTcp(absl::string_view table, const std::string& local_hex,
                                         const std::vector<int>& server_ports) {
  // "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ..."
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 8 || f[1] != local_hex) continue;
    const size_t colon = f[2].rfind(':');
    if (colon == absl::string_view::npos) continue;
    uint32_t rport = 0;
    if (!absl::SimpleHexAtoi(f[2].substr(colon + 1), &rport)) continue;
    bool ours = false;
    for (int p : server_ports) ours = ours || static_cast<uint32_t>(p) == rport;
    if (!ours) continue;
    uint32_t uid = 0;
    if (!absl::SimpleAtoi(f[7], &uid)) continue;
    return uid;
  }
  return std::nullopt;
}

namespace {
std::string ReadAll(const char* path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

std::optional<uid_t> LocalTcpPeerUid(absl::string_view peer, const std::vector<int>& server_ports) {
  bool v6 = false;
  const std::string local = ProcNetAddress(peer, &v6);
  if (local.empty()) return std::nullopt;
  if (auto uid = FindUidInProcNetTcp(ReadAll(v6 ? "/proc/net/tcp6" : "/proc/net/tcp"), local,
                                     server_ports))
    return uid;
  // gRPC's clients open dual-stack sockets: an IPv4 peer's end is then an
  // IPv6 socket whose address is v4-mapped (::ffff:a.b.c.d).
  if (!v6)
    return FindUidInProcNetTcp(ReadAll("/proc/net/tcp6"), "0000000000000000FFFF0000" + local,
                               server_ports);
  return std::nullopt;
}

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
  std::string who =
      uid ? "uid " + std::to_string(*uid) : std::string("a caller without a known uid");
  return who + " may not open it read-write itself (owner uid " + std::to_string(st.st_uid) +
         ", group " + std::to_string(st.st_gid) + ", mode " + mode + "; the " + whose +
         " bits apply)";
}

}  // namespace kerneld::server
