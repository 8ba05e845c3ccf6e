// kerneld --sandbox-worker: the sandbox worker process's loop (supervisor.h).
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "sandbox/supervisor.h"
#include "sandbox/worker.h"

namespace kerneld::server::sandbox {

namespace {

// --sandbox_test_mode=fake: a worker without a GPU for the supervision
// tests, whose kRun payload says what to do: "ok", "crash" (SIGSEGV),
// "abort", "hang", "fault" (an INTERNAL reply, as a CUDA fault gives).
Status FakeRun(std::string_view what) {
  if (what == "crash") {
    volatile int* p = nullptr;
    *p = 1;  // a real SIGSEGV, as a crashing worker gives
  }
  if (what == "abort") std::abort();
  if (what == "hang")
    for (;;) pause();
  if (what == "fault")
    return Internal("CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered");
  return Status::Ok();
}

}  // namespace

int SandboxWorkerMain(int argc, char** argv) {
  int fd = -1, device = -1;
  bool fake = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--sandbox_fd=", 0) == 0 && !absl::SimpleAtoi(a.substr(13), &fd)) return 2;
    if (a.rfind("--sandbox_device=", 0) == 0 && !absl::SimpleAtoi(a.substr(17), &device)) return 2;
    if (a == "--sandbox_test_mode=fake") fake = true;
  }
  if (fd < 0) return 2;
  // No privilege a client's code could gain, and gone with the daemon.
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 3;  // the daemon died before the line above
  Status init = fake ? Status::Ok() : InitWorkerDevice(device);
  for (;;) {
    Frame kind;
    std::string payload;
    if (!ReadFrame(fd, kMaxRequestBytes, &kind, &payload)) return 0;  // the daemon closed it
    Status st;
    if (kind == Frame::kPing) {
      st = init.ok() ? Status::Ok() : init;
    } else if (kind == Frame::kRun) {
      st = fake ? FakeRun(payload) : RunInWorker(payload);
    } else if (kind == Frame::kBench && !fake) {
      double us = 0;
      st = BenchInWorker(payload, &us);
      if (st.ok()) st = Status(StatusCode::kOk, std::to_string(us));
    } else {
      st = InvalidArgument("unknown frame");
    }
    if (!WriteFrame(fd, Frame::kReply, EncodeReply(st))) return 0;
    if (st.code() == StatusCode::kInternal || !init.ok()) return 3;  // a poisoned context
  }
}

}  // namespace kerneld::server::sandbox
