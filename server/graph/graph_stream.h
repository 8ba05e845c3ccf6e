// Graph messages on ExecuteStream (docs/graphs.md, "On a stream"): an
// ExecuteRequest whose `graph` is set runs through the daemon's GraphRunner
// exactly as ExecuteGraph runs it (the same validation, placement, worker
// task and replay cache), between the stream's plain calls. Its answer is
// ExecuteResponse.graph, with the message's request_id and status also at
// the top level, so a stream client reads every answer alike. Shared by the
// callback stream (execute_stream.h) and the sync one (sync_service.h).
#pragma once

#include <functional>

#include "kerneld/v1/kerneld.pb.h"
#include "service/request_runner.h"

namespace kerneld::server {

// Runs the graph message `req` (req.has_graph()) and fills `resp`; `done`
// is called exactly once with the message's status, from a worker thread or
// from this call. `req` and `resp` stay alive until then. A message that
// also sets a plain call's fields (op, inputs, outputs, attrs, backend,
// device) is refused with INVALID_ARGUMENT; a daemon without a graph runner
// answers UNIMPLEMENTED. Nothing throws out of it.
void StartGraphMessage(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
                       std::function<void(const Status&)> done);

}  // namespace kerneld::server
