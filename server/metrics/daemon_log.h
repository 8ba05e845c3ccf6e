// kerneld's own log lines: start-up, signals, drain, warnings and errors.
//
// They follow --log_format like the request log: text is "kerneld: MESSAGE"
// (as it always was); json is one object a line, {"ts", "level", "event",
// "msg", fields...}, so that with --log_format=json every line kerneld
// writes parses as JSON and carries a time and a level. Each line is one
// write(), so lines from different threads never interleave.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace kerneld::server {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
const char* LogLevelName(LogLevel level);  // "debug", "info", "warn", "error"

// Set once at start-up, before other threads log (main, from --log_format).
void SetDaemonLogJson(bool json);
bool DaemonLogJson();

// A field of a JSON line: a string, or a number written as is.
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v), quoted(true) {}
  LogField(std::string_view k, double v);
  std::string key, value;
  bool quoted;
};

// One line to fd (default stderr). event names what happened in a fixed,
// machine-matchable word ("listening", "drained", ...); message is the text
// line without its "kerneld: " prefix; fields go only into JSON lines.
void DaemonLog(LogLevel level, std::string_view event, std::string_view message,
               std::initializer_list<LogField> fields = {}, int fd = 2);

// The time now as RFC 3339, UTC, microseconds: 2026-11-26T13:12:00.123456Z.
std::string LogTimestamp();

// JSON string contents: '"', '\\' and control bytes (and DEL) escaped, and
// bytes that are not UTF-8 replaced by U+FFFD, so a line always parses.
std::string JsonEscape(std::string_view s);

// The escapes both log formats share: appends c to *o as \\, \n, \r or \t,
// or another control byte (or DEL) through `control_format` ("\\u%04x" in
// JSON, "\\x%02x" in text lines); false, appending nothing, for any other
// byte.
bool AppendControlEscape(char c, const char* control_format, std::string* o);

}  // namespace kerneld::server
