#include "metrics/grpc_log.h"

#include <grpc/support/log.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "metrics/daemon_log.h"

namespace kerneld::server {

namespace {

// A token bucket: a burst of 20 lines, then 5 a second; the line after a
// gap says how many were dropped (libprotobuf's are limited the same way).
constexpr double kPerSecond = 5, kBurst = 20;
std::mutex g_mu;
double g_tokens = kBurst;
std::chrono::steady_clock::time_point g_at;
uint64_t g_dropped = 0;

bool Admit(uint64_t* dropped_before) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto now = std::chrono::steady_clock::now();
  if (g_at != std::chrono::steady_clock::time_point())
    g_tokens =
        std::min(kBurst, g_tokens + std::chrono::duration<double>(now - g_at).count() * kPerSecond);
  g_at = now;
  if (g_tokens < 1) {
    ++g_dropped;
    return false;
  }
  g_tokens -= 1;
  *dropped_before = std::exchange(g_dropped, 0);
  return true;
}

void OnGrpcLog(gpr_log_func_args* args) {
  uint64_t dropped = 0;
  if (!Admit(&dropped)) return;
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  std::string file = args->file != nullptr ? args->file : "?";
  file = file.substr(file.rfind('/') + 1);  // npos + 1 == 0: the whole name
  std::string text = "grpc " + file + ":" + std::to_string(args->line) + ": " +
                     (args->message != nullptr ? args->message : "");
  if (dropped > 0)
    text += " (" + std::to_string(dropped) + " earlier grpc lines dropped by the rate limit)";
  DaemonLog(level, "library_log", text,
            {{"library", "grpc"}, {"dropped", static_cast<double>(dropped)}});
}

}  // namespace

void RouteGrpcLogs() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(&OnGrpcLog); });
}

}  // namespace kerneld::server
