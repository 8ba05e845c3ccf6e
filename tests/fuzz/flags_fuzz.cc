// flags_fuzz: ParseFlags with a fuzzed argv (the input split on NUL bytes,
// argv[0] fixed). Checked: it never crashes or throws, a refusal always
// says why, and an accepted command line leaves every numeric setting in
// the range the daemon relies on.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"kerneld"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (size > 0) args.push_back(cur);
  if (args.size() > 64) return -1;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  kerneld::server::Config cfg;
  bool help = false;
  std::string err =
      kerneld::server::ParseFlags(static_cast<int>(args.size()), argv.data(), &cfg, &help);
  if (!err.empty()) {
    if (help) __builtin_trap();
    return 0;
  }
  if (help) return 0;
  if (cfg.listen.empty()) __builtin_trap();
  if (cfg.max_message_mb <= 0 || cfg.max_message_mb > 2047) __builtin_trap();
  if (cfg.max_inflight_mb <= 0 || cfg.max_inflight_mb > (1 << 24)) __builtin_trap();
  if (cfg.cpu_workers <= 0 || cfg.cpu_threads < 0 || cfg.queue_capacity <= 0 ||
      cfg.stream_window <= 0)
    __builtin_trap();
  if (cfg.worker_spin_us < 0 || cfg.worker_spin_us > 1000000) __builtin_trap();
  if (!(cfg.trace_sample_rate >= 0 && cfg.trace_sample_rate <= 1)) __builtin_trap();
  if (!(cfg.drain_timeout_s >= 0 && cfg.drain_timeout_s <= 1e6))
    __builtin_trap();  // ms in an int64
  if (cfg.log_format != "text" && cfg.log_format != "json") __builtin_trap();
  return 0;
}
