#include "metrics/daemon_log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace kerneld::server {

namespace {

std::atomic<bool> g_json{false};

// Length of the valid UTF-8 sequence at s[i], or 0 (overlong forms,
// surrogates and code points past U+10FFFF are invalid).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void SetDaemonLogJson(bool json) { g_json.store(json, std::memory_order_relaxed); }
bool DaemonLogJson() { return g_json.load(std::memory_order_relaxed); }

LogField::LogField(std::string_view k, double v) : key(k), quoted(false) {
  char b[32];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(b, sizeof b, "%.0f", v);
  else if (std::isfinite(v))
    std::snprintf(b, sizeof b, "%.6g", v);
  else
    std::snprintf(b, sizeof b, "null");  // JSON has no NaN or Inf
  value = b;
}

bool AppendControlEscape(char c, const char* control_format, std::string* o) {
  const auto u = static_cast<unsigned char>(c);
  switch (c) {
    case '\\':
      *o += "\\\\";  // so an escaped byte and a literal "\\n" differ
      return true;
    case '\n':
      *o += "\\n";
      return true;
    case '\r':
      *o += "\\r";
      return true;
    case '\t':
      *o += "\\t";
      return true;
    default:
      if (u >= 0x20 && u != 0x7f) return false;
      char b[8];
      std::snprintf(b, sizeof b, control_format, u);
      *o += b;
      return true;
  }
}

std::string JsonEscape(std::string_view s) {
  std::string o;
  o.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x80) {
      const size_t n = Utf8Length(s, i);
      if (n == 0) {
        o += "\\ufffd";
        ++i;
      } else {
        o.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    if (s[i] == '"')
      o += "\\\"";
    else if (!AppendControlEscape(s[i], "\\u%04x", &o))
      o += s[i];
    ++i;
  }
  return o;
}

std::string LogTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char b[80];  // room for any int the compiler can imagine (-Wformat-truncation)
  std::snprintf(b, sizeof b, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(us % 1000000));
  return b;
}

void DaemonLog(LogLevel level, std::string_view event, std::string_view message,
               std::initializer_list<LogField> fields, int fd) {
  std::string line;
  if (DaemonLogJson()) {
    line = "{\"ts\":\"" + LogTimestamp() + "\",\"level\":\"" + LogLevelName(level) +
           "\",\"event\":\"" + JsonEscape(event) + "\",\"msg\":\"" + JsonEscape(message) + "\"";
    for (const auto& f : fields) {
      line += ",\"" + JsonEscape(f.key) + "\":";
      line += f.quoted ? "\"" + JsonEscape(f.value) + "\"" : f.value;
    }
    line += "}\n";
  } else {
    line = "kerneld: ";
    line += message;
    line += "\n";
  }
  (void)!write(fd, line.data(), line.size());
}

}  // namespace kerneld::server
