// The CPU device: runs implementations directly on host views, with a
// shared intra-op thread pool.
#pragma once

#include <memory>

#include "devices/worker.h"
#include "kerneld/thread_pool.h"

namespace kerneld::server {

// final: its constructor starts threads that call the virtual ThreadStart.
class CpuWorker final : public DeviceWorker {
 public:
  // workers: requests run at once; threads: intra-op pool size (0 = all cores).
  CpuWorker(int workers, int threads, int capacity);
  ~CpuWorker() override { Stop(); }
  // The intra-op pool requests run on (the offline sweep times on it too).
  ThreadPool* pool() const { return pool_.get(); }

 protected:
  Status Execute(Task& task, TaskTiming* timing) override;

 private:
  std::unique_ptr<ThreadPool> pool_;
};

DeviceInfo CpuDeviceInfo();

}  // namespace kerneld::server
