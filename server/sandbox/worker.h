// Inside the sandbox worker process: what a kRun frame does. The CUDA build
// maps the request's buffers (IPC handles), loads the CUBIN, launches and
// synchronizes on the worker's own context (worker_cuda.cc); without CUDA
// it refuses (worker_no_cuda.cc). A status of INTERNAL means the context is
// poisoned (a fault): the worker replies, then exits, and is replaced.
#pragma once

#include <string_view>

#include "kerneld/status.h"

namespace kerneld::server::sandbox {

// Makes the worker's context on `device` (the ping's answer waits for it).
Status InitWorkerDevice(int device);
Status RunInWorker(std::string_view payload);
// A kBench frame: the kRun payload after its int32 reps, launched 3 + reps
// times with an L2 read-flush before each timed one; *median_us.
Status BenchInWorker(std::string_view payload, double* median_us);

}  // namespace kerneld::server::sandbox
