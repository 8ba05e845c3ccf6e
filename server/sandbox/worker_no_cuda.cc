// A build without CUDA: the worker has no device to run on.
#include "sandbox/worker.h"

namespace kerneld::server::sandbox {

Status InitWorkerDevice(int) {
  return FailedPrecondition("this build of kerneld has no CUDA: the sandbox cannot run kernels");
}
Status BenchInWorker(std::string_view, double*) {
  return FailedPrecondition("this build of kerneld has no CUDA: the sandbox cannot run kernels");
}
Status RunInWorker(std::string_view) {
  return FailedPrecondition("this build of kerneld has no CUDA: the sandbox cannot run kernels");
}

}  // namespace kerneld::server::sandbox
