#include "service/library_log.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <mutex>

#include "metrics/daemon_log.h"

namespace kerneld::server {

bool LogRateLimit::Admit(std::chrono::steady_clock::time_point now, uint64_t* dropped_before) {
  if (at_ != std::chrono::steady_clock::time_point{}) {
    const double dt = std::chrono::duration<double>(now - at_).count();
    if (dt > 0) tokens_ = std::min(burst_, tokens_ + dt * rate_);
  }
  at_ = now;
  if (tokens_ < 1) {
    ++dropped_;
    return false;
  }
  tokens_ -= 1;
  *dropped_before = dropped_;
  dropped_ = 0;
  return true;
}

namespace {

std::mutex g_mu;
LogRateLimit* g_limit = nullptr;

void OnProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                   const std::string& message) {
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_limit->Admit(std::chrono::steady_clock::now(), &dropped)) return;
  }
  const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::kError
                        : level == google::protobuf::LOGLEVEL_WARNING ? LogLevel::kWarning
                                                                      : LogLevel::kInfo;
  std::string text =
      "libprotobuf " + std::string(file ? file : "?") + ":" + std::to_string(line) + ": " + message;
  if (dropped > 0)
    text +=
        " (" + std::to_string(dropped) + " earlier libprotobuf lines dropped by the rate limit)";
  DaemonLog(ours, "library_log", text,
            {{"library", "libprotobuf"}, {"dropped", static_cast<double>(dropped)}});
}

}  // namespace

void RouteLibraryLogs() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_limit = new LogRateLimit(kLibraryLogPerSecond, kLibraryLogBurst);  // lives with the process
    google::protobuf::SetLogHandler(&OnProtobufLog);
  });
}

}  // namespace kerneld::server
