// StartStatus: the Status a call answers with when starting it throws.
//
// No exception may escape into gRPC: it answered UNIMPLEMENTED with an empty
// message and the in-flight count never returned to zero. ExecuteRequest
// and ExecuteGraph start their calls the same way, so they map exceptions
// to statuses here, with the same words.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "kerneld/status.h"

namespace kerneld::server {

// Runs start(); returns OK, or the status of what it threw, its message
// prefixed by `who` (an op or "graph", already sanitized).
template <typename Start>
Status StartStatus(std::string_view who, Start&& start) {
  try {
    start();
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(std::string(who) +
                             ": kerneld ran out of host memory for this request; retry later "
                             "or send a smaller one");
  } catch (const std::exception& e) {
    return Internal(std::string(who) + ": " + Sanitize(e.what()));
  }
}

}  // namespace kerneld::server
