// One sandbox worker process (`kerneld --sandbox-worker`), spawned and
// supervised by the daemon, one per GPU: it holds its own CUDA context, so a
// user kernel's sticky fault poisons that context only. The supervisor
// sends one request at a time over a socketpair and waits for the reply
// within a deadline. A worker that dies (a signal, an exit) fails the
// request it was running with INTERNAL naming how; one past the deadline is
// killed and the request fails DEADLINE_EXCEEDED. Either way the next
// request starts a fresh worker. Tests run the same binary in a test mode
// (--sandbox_test_mode=crash|hang) as a fake worker that crashes or hangs.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "kerneld/status.h"
#include "sandbox/protocol.h"

namespace kerneld::server::sandbox {

class Supervisor {
 public:
  struct Options {
    std::string binary = "/proc/self/exe";  // the worker: this daemon's own binary
    int device = -1;                        // CUDA ordinal; -1: none (test modes)
    std::vector<std::string> extra_args;    // --sandbox_test_mode=..., for tests
  };
  explicit Supervisor(Options opts);
  ~Supervisor();  // kills the worker
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Sends `kind` with `payload` and returns the worker's reply status. A
  // worker that is not running is started first (and answers a ping).
  // `what` names the request in messages ("my_scale").
  Status Call(Frame kind, std::string_view payload, std::chrono::milliseconds timeout,
              const std::string& what);

  pid_t pid() const { return pid_.load(); }
  // Workers started, and replaced after a fault or a timeout.
  int64_t starts() const { return starts_.load(); }
  int64_t replacements() const { return replacements_.load(); }
  // The seconds the last replacement took to answer its first ping.
  double last_start_seconds() const { return last_start_s_.load(); }

 private:
  Status StartLocked();
  // Kills the worker (SIGKILL) and reaps it; `how` gets how it ended.
  void KillLocked(std::string* how);
  // Waits up to `timeout` for a frame; *timed_out when none came.
  Status AwaitReplyLocked(std::chrono::milliseconds timeout, bool* timed_out, std::string* reply);

  const Options opts_;
  std::mutex mu_;  // one request at a time
  int fd_ = -1;
  std::atomic<pid_t> pid_{-1};
  std::atomic<int64_t> starts_{0}, replacements_{0};
  std::atomic<double> last_start_s_{0};
  bool replace_next_ = false;
};

// kerneld --sandbox-worker --sandbox_fd=N [--sandbox_device=K]
// [--sandbox_test_mode=crash|hang]: the worker's main; returns its exit code.
int SandboxWorkerMain(int argc, char** argv);

}  // namespace kerneld::server::sandbox
