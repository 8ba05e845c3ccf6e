// The ExecutionInfo of a finished task (Execute and ExecuteGraph answer the
// same fields): where it ran and its timeline.
#pragma once

#include <string>

#include "devices/task.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::server {

inline void SetExecutionInfo(const std::string& backend, const std::string& device,
                             const TaskTiming& timing, v1::ExecutionInfo* info) {
  info->set_backend(backend);
  info->set_device(device);
  info->set_queue_ns(timing.queue_ns);
  info->set_execute_ns(timing.execute_ns);
  info->set_scheduled_ns(timing.scheduled_ns);
  info->set_dequeued_ns(timing.dequeued_ns);
  info->set_launched_ns(timing.launched_ns);
  info->set_kernel_done_ns(timing.kernel_done_ns);
}

}  // namespace kerneld::server
