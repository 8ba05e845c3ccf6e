#include "sandbox/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "metrics/daemon_log.h"
#include "sandbox/sandbox_stats.h"

namespace kerneld::server::sandbox {

namespace {

// How a reaped worker ended: "killed by signal 11 (Segmentation fault)".
std::string HowItEnded(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

}  // namespace

Supervisor::Supervisor(Options opts) : opts_(std::move(opts)) {}

Supervisor::~Supervisor() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string how;
  KillLocked(&how);
}

void Supervisor::KillLocked(std::string* how) {
  const pid_t pid = pid_.exchange(-1);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *how = HowItEnded(status);
}

Status Supervisor::StartLocked() {
  const auto t0 = std::chrono::steady_clock::now();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Internal(std::string("sandbox: socketpair: ") + strerror(errno));
  std::vector<std::string> args = {opts_.binary, "--sandbox-worker",
                                   "--sandbox_fd=" + std::to_string(sv[1])};
  if (opts_.device >= 0) args.push_back("--sandbox_device=" + std::to_string(opts_.device));
  args.insert(args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return Internal(std::string("sandbox: fork: ") + strerror(errno));
  }
  if (pid == 0) {
    // The child's end survives exec; every other descriptor is CLOEXEC or
    // closed here, so the worker holds no socket or buffer of the daemon.
    fcntl(sv[1], F_SETFD, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the daemon
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != sv[1]) close(fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(sv[1]);
  fd_ = sv[0];
  pid_.store(pid);
  starts_.fetch_add(1);
  SandboxStats::Global().starts.fetch_add(1, std::memory_order_relaxed);
  // Ready when it answers a ping (its CUDA context is made by then).
  if (!WriteFrame(fd_, Frame::kPing, {})) {
    std::string how;
    KillLocked(&how);
    return Internal("sandbox worker did not start: " + how);
  }
  bool timed_out = false;
  std::string reply;
  Status st = AwaitReplyLocked(std::chrono::seconds(30), &timed_out, &reply);
  if (st.ok()) st = DecodeReply(reply);
  if (!st.ok()) {
    std::string how;
    KillLocked(&how);
    return Internal("sandbox worker did not start: " + st.message() +
                    (how.empty() ? "" : "; " + how));
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  last_start_s_.store(std::chrono::duration<double>(took).count());
  SandboxStats::Global().start_ns.store(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
      std::memory_order_relaxed);
  return Status::Ok();
}

Status Supervisor::AwaitReplyLocked(std::chrono::milliseconds timeout, bool* timed_out,
                                    std::string* reply) {
  *timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *timed_out = true;
      return Status::Ok();
    }
    pollfd p{fd_, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;  // the deadline is checked above
    Frame kind;
    if (!ReadFrame(fd_, kMaxReplyBytes, &kind, reply) || kind != Frame::kReply)
      return Internal("the sandbox worker ended");
    return Status::Ok();
  }
}

Status Supervisor::Call(Frame kind, std::string_view payload, std::chrono::milliseconds timeout,
                        const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pid_.load() <= 0) {
    if (replace_next_) replacements_.fetch_add(1);
    replace_next_ = false;
    KERNELD_RETURN_IF_ERROR(StartLocked());
  }
  bool timed_out = false;
  std::string reply;
  Status st = WriteFrame(fd_, kind, payload) ? AwaitReplyLocked(timeout, &timed_out, &reply)
                                             : Internal("the sandbox worker ended");
  if (st.ok() && !timed_out) {
    Status r = DecodeReply(reply);
    // A fault poisons the worker's context: it exits after saying so, and
    // is replaced on the next request.
    if (r.code() == StatusCode::kInternal) {
      std::string how;
      KillLocked(&how);
      replace_next_ = true;
      SandboxStats::Global().faults.fetch_add(1, std::memory_order_relaxed);
    }
    return r;
  }
  std::string how;
  KillLocked(&how);
  replace_next_ = true;
  const std::string device = opts_.device >= 0 ? " on cuda:" + std::to_string(opts_.device) : "";
  (timed_out ? SandboxStats::Global().timeouts : SandboxStats::Global().crashes)
      .fetch_add(1, std::memory_order_relaxed);
  if (timed_out) {
    DaemonLog(LogLevel::kWarning, "sandbox_timeout",
              what + ": ran past " + std::to_string(timeout.count()) + " ms" + device +
                  "; its sandbox worker was killed and is replaced",
              {{"kernel", what}});
    return {StatusCode::kDeadlineExceeded,
            what + ": the user kernel ran past " + std::to_string(timeout.count()) +
                " ms (--user_kernel_timeout_ms); its sandbox was killed and is replaced"};
  }
  DaemonLog(LogLevel::kWarning, "sandbox_crash",
            what + ": the sandbox worker" + device + " " + how + "; it is replaced",
            {{"kernel", what}});
  return Internal(what + ": the sandbox worker running it " + how +
                  "; the request failed and the sandbox is replaced");
}

}  // namespace kerneld::server::sandbox
