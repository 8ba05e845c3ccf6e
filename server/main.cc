// kerneld: entry point. Flags, start-up, signals, drain.
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "auth/token_reloader.h"
#include "build_info.h"
#include "config.h"
#include "daemon.h"

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
  TuneMalloc();
  using kerneld::server::Config;
  Config cfg;
  bool help = false;
  if (std::string err = kerneld::server::ParseFlags(argc, argv, &cfg, &help); !err.empty()) {
    std::fprintf(stderr, "kerneld: %s\n", err.c_str());
    return 2;
  }
  if (help) {
    std::fputs(kerneld::server::FlagsHelp().c_str(), stdout);
    return 0;
  }

  // Block the shutdown signals in every thread (gRPC's included); one thread
  // waits for them and drains.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);  // re-reads --auth_tokens
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  kerneld::server::Daemon daemon(cfg);
  if (std::string err = daemon.Start(); !err.empty()) {
    std::fprintf(stderr, "kerneld: %s\n", err.c_str());
    return 1;
  }
  for (const auto& a : daemon.bound_addresses())
    std::printf("kerneld %s listening on %s\n", kerneld::server::kKerneldVersion, a.c_str());
  for (const auto& a : daemon.tls_addresses())
    std::printf("kerneld %s listening on %s (TLS%s)\n", kerneld::server::kKerneldVersion, a.c_str(),
                cfg.tls_client_ca.empty() ? "" : ", client certificates required");
  if (daemon.metrics_port() > 0)
    std::printf("kerneld metrics on port %d (/metrics)\n", daemon.metrics_port());
  std::fflush(stdout);

  // SIGHUP's reload runs on a thread of its own, so SIGTERM always finds the
  // signal thread waiting for it (auth/token_reloader.h).
  kerneld::server::TokenReloader reloader([&daemon] {
    if (std::string err = daemon.ReloadTokens(); !err.empty())
      std::fprintf(stderr, "kerneld: SIGHUP: %s (the previous tokens stay in force)\n",
                   err.c_str());
    else
      std::fprintf(stderr, "kerneld: SIGHUP: re-read --auth_tokens\n");
  });
  std::thread signals([&] {
    int sig = 0;
    for (;;) {
      sigwait(&sigs, &sig);
      if (sig != SIGHUP) break;
      reloader.Request();
    }
    std::fprintf(stderr, "kerneld: %s received; draining in-flight requests\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    auto t0 = std::chrono::steady_clock::now();
    daemon.Shutdown();
    std::fprintf(
        stderr, "kerneld: drained in %.0f ms\n",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  });
  daemon.Wait();
  // Wait returns only after Shutdown, which only the signal thread calls.
  signals.join();
  std::fprintf(stderr, "kerneld: stopped\n");
  return 0;
}
