// kerneld: entry point. Flags, start-up, signals, drain.
#include <grpc/grpc.h>
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "auth/token_reloader.h"
#include "build_info.h"
#include "config.h"
#include "daemon.h"
#include "jit/jit_setup.h"
#include "metrics/daemon_log.h"
#include "metrics/grpc_log.h"
#include "sandbox/supervisor.h"

namespace {

// Large inline tensors (request strings from the parser, response strings
// the kernel writes) are allocated and freed once per request. With glibc's
// defaults, blocks above the dynamic mmap threshold are mmapped and
// unmapped every time, and freed memory at the top of a thread's arena is
// handed back with madvise: either way the next request page-faults on
// every 4 KiB of its 2 MiB (measured: server total for scale on 2 MiB
// inline fell from 944 to 480 us, decode from 273 to 107 us, on the 2-core
// machine). Keep blocks up to 32 MiB on the heap and up to 64 MiB of free
// top per arena; what a request holds is bounded by --max_inflight_mb.
void TuneMalloc() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  // The user kernels' sandbox worker is this binary too (sandbox/supervisor.h).
  if (argc > 1 && std::string(argv[1]) == "--sandbox-worker")
    return kerneld::server::sandbox::SandboxWorkerMain(argc, argv);
  TuneMalloc();
  using kerneld::server::Config;
  using kerneld::server::DaemonLog;
  using kerneld::server::LogField;
  using kerneld::server::LogLevel;
  Config cfg;
  bool help = false;
  const std::string flag_err = kerneld::server::ParseFlags(argc, argv, &cfg, &help);
  // Every line kerneld writes follows --log_format (metrics/daemon_log.h).
  kerneld::server::SetDaemonLogJson(cfg.log_format == "json");
  kerneld::server::RouteGrpcLogs();
  if (!flag_err.empty()) {
    DaemonLog(LogLevel::kError, "bad_flags", flag_err);
    return 2;
  }
  if (help) {
    std::fputs(kerneld::server::FlagsHelp().c_str(), stdout);
    return 0;
  }
  // An image's warmed JIT cache: compile and exit, no GPU, nothing served.
  if (!cfg.jit_precompile_arch.empty()) return kerneld::server::PrecompileJit(cfg);

  // Block the shutdown signals in every thread (gRPC's included); one thread
  // waits for them and drains.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);  // re-reads --auth_tokens
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // gRPC stays initialized until the process exits: the library's clean-up
  // (grpc_shutdown, which ~grpc::Server runs when it holds the last
  // reference) joins the thread of TCP's backup poller, and that poller
  // polls for up to 10 s after any write that found a socket full (an
  // answer to a client that stopped reading, as a cancelled stream's large
  // unread answer does). kerneld logged "stopped", then took those 10 s to
  // exit. By then the server has shut down and every call has ended; the
  // kernel takes back the library's threads and memory at exit.
  grpc_init();
  kerneld::server::Daemon daemon(cfg);
  if (std::string err = daemon.Start(); !err.empty()) {
    DaemonLog(LogLevel::kError, "start_failed", err);
    return 1;
  }
  // The start-up lines go to stdout, as they always did; text keeps its
  // words exactly (scripts read them), json is a line like every other.
  const std::string version = kerneld::server::kKerneldVersion;
  auto announce = [&](const std::string& event, const std::string& text,
                      std::initializer_list<LogField> fields) {
    if (kerneld::server::DaemonLogJson())
      DaemonLog(LogLevel::kInfo, event, text, fields, 1);
    else
      std::printf("%s\n", text.c_str());
  };
  for (const auto& a : daemon.bound_addresses())
    announce("listening", "kerneld " + version + " listening on " + a,
             {{"address", a}, {"version", version}, {"tls", "no"}});
  for (const auto& a : daemon.tls_addresses()) {
    const char* tls = cfg.tls_client_ca.empty() ? "yes" : "mutual";
    announce("listening",
             "kerneld " + version + " listening on " + a + " (TLS" +
                 (cfg.tls_client_ca.empty() ? "" : ", client certificates required") + ")",
             {{"address", a}, {"version", version}, {"tls", tls}});
  }
  if (daemon.metrics_port() > 0)
    announce("metrics_listening",
             "kerneld metrics on port " + std::to_string(daemon.metrics_port()) + " (/metrics)",
             {{"port", static_cast<double>(daemon.metrics_port())}});
  std::fflush(stdout);

  // SIGHUP's reload runs on a thread of its own, so SIGTERM always finds the
  // signal thread waiting for it (auth/token_reloader.h).
  kerneld::server::TokenReloader reloader([&daemon] {
    if (std::string err = daemon.ReloadTokens(); !err.empty())
      DaemonLog(LogLevel::kError, "reload_failed",
                "SIGHUP: " + err + " (the previous tokens stay in force)");
    else
      DaemonLog(LogLevel::kInfo, "reloaded", "SIGHUP: re-read --auth_tokens");
  });
  std::thread signals([&] {
    int sig = 0;
    for (;;) {
      sigwait(&sigs, &sig);
      if (sig != SIGHUP) break;
      reloader.Request();
    }
    const std::string name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    DaemonLog(LogLevel::kInfo, "draining", name + " received; draining in-flight requests",
              {{"signal", name}});
    auto t0 = std::chrono::steady_clock::now();
    daemon.Shutdown();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char text[64];
    std::snprintf(text, sizeof text, "drained in %.0f ms", ms);
    DaemonLog(LogLevel::kInfo, "drained", text, {{"drain_ms", std::round(ms)}});
  });
  daemon.Wait();
  // Wait returns only after Shutdown, which only the signal thread calls.
  signals.join();
  DaemonLog(LogLevel::kInfo, "stopped", "stopped");
  return 0;
}
