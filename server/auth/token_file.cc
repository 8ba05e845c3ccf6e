#include "auth/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "config.h"

namespace kerneld::server {

namespace {

// Printable ASCII without spaces: tokens and principals travel in metadata
// and in log lines, where anything else would need escaping.
bool Printable(absl::string_view s) {
  for (char c : s)
    if (c <= ' ' || c > '~') return false;
  return true;
}

Status LineError(int line, const std::string& what) {
  return InvalidArgument("--auth_tokens line " + std::to_string(line) + ": " + what);
}

Status ParseOption(int line, absl::string_view opt, TokenEntry* e) {
  const size_t eq = opt.find('=');
  if (eq == absl::string_view::npos)
    return LineError(line, "option " + Quote(std::string(opt)) +
                               " is not key=value (uid, max_bytes, max_buffers, max_inflight)");
  const std::string key(opt.substr(0, eq)), value(opt.substr(eq + 1));
  int64_t v = 0;
  if (key == "uid") {
    uint32_t uid = 0;
    if (!absl::SimpleAtoi(value, &uid) || uid == static_cast<uint32_t>(-1))
      return LineError(line, "uid=" + Sanitize(value) + " is not a uid (a number)");
    e->uid = uid;
  } else if (key == "max_bytes") {
    if (!ParseByteSize(value, &v))
      return LineError(line, "max_bytes=" + Sanitize(value) + " is not a size (N, NK, NM, NG)");
    e->max_bytes = v;
  } else if (key == "max_buffers" || key == "max_inflight") {
    if (!absl::SimpleAtoi(value, &v) || v < 0)
      return LineError(line, key + "=" + Sanitize(value) + " is not a count >= 0");
    (key == "max_buffers" ? e->max_buffers : e->max_inflight) = v;
  } else {
    return LineError(
        line, "unknown option " + Quote(key) + " (uid, max_bytes, max_buffers, max_inflight)");
  }
  return Status::Ok();
}

}  // namespace

Status ParseTokenFile(absl::string_view text, TokenTable* out) {
  if (text.size() > kMaxTokenFileBytes)
    return InvalidArgument("--auth_tokens file has " + std::to_string(text.size()) +
                           " bytes; at most " + std::to_string(kMaxTokenFileBytes));
  TokenTable table;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (f.empty()) continue;
    if (f.size() < 3)
      return LineError(
          line_no, "expected TOKEN PRINCIPAL ROLE, got " + std::to_string(f.size()) + " fields");
    const absl::string_view token = f[0], principal = f[1], role = f[2];
    // The token itself is never echoed: the message may reach a log.
    if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength || !Printable(token))
      return LineError(line_no, "the token must be " + std::to_string(kMinTokenLength) + " to " +
                                    std::to_string(kMaxTokenLength) +
                                    " printable characters (try: openssl rand -hex 32)");
    if (principal.empty() || principal.size() > kMaxPrincipalLength || !Printable(principal) ||
        principal == kAnonymous)
      return LineError(line_no, "principal " + Quote(std::string(principal)) + " must be 1 to " +
                                    std::to_string(kMaxPrincipalLength) +
                                    " printable characters without spaces, and not \"anonymous\"");
    TokenEntry e;
    e.principal = std::string(principal);
    if (role == "user")
      e.role = Role::kUser;
    else if (role == "admin")
      e.role = Role::kAdmin;
    else
      return LineError(line_no, "role " + Quote(std::string(role)) + " is neither user nor admin");
    for (size_t i = 3; i < f.size(); ++i) KERNELD_RETURN_IF_ERROR(ParseOption(line_no, f[i], &e));
    if (!table.emplace(std::string(token), std::move(e)).second)
      return LineError(line_no,
                       "this token is already on an earlier line; each token names one principal");
  }
  *out = std::move(table);
  return Status::Ok();
}

Status LoadTokenFile(const std::string& path, TokenTable* out) {
  // O_NONBLOCK: a FIFO (or a device) put at the path must not hold the
  // reload in open() or read(); only a regular file is read.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return InvalidArgument("cannot open --auth_tokens " + Quote(path) + ": " +
                           std::strerror(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const bool fifo = S_ISFIFO(info.st_mode);
    close(fd);
    return InvalidArgument("--auth_tokens " + Quote(path) + " is not a regular file" +
                           (fifo ? " (a FIFO)" : "") + "; kerneld reads tokens only from one");
  }
  if (info.st_size > static_cast<off_t>(kMaxTokenFileBytes)) {
    close(fd);
    return InvalidArgument("--auth_tokens " + Quote(path) + " has " + std::to_string(info.st_size) +
                           " bytes; at most " + std::to_string(kMaxTokenFileBytes));
  }
  std::string text;
  char buf[65536];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTokenFileBytes) break;
  }
  const int e = errno;
  close(fd);
  if (n < 0)
    return InvalidArgument("cannot read --auth_tokens " + Quote(path) + ": " + std::strerror(e));
  Status st = ParseTokenFile(text, out);
  if (!st.ok()) return InvalidArgument(st.message() + " (in " + Quote(path) + ")");
  return st;
}

}  // namespace kerneld::server
