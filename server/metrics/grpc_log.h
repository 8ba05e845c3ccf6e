// gRPC core's log (gpr_log: "E1126 13:31:35.680 18396 tcp_server_posix.cc:205]
// Failed accept4: ...") through kerneld's own (metrics/daemon_log.h): in
// --log_format=json it is a JSON line with "ts" and "level" like every other,
// and, like libprotobuf's (service/library_log.h), rate limited, so that
// what clients make gRPC log cannot flood stderr. GRPC_VERBOSITY still
// decides which severities gRPC logs at all.
#pragma once

namespace kerneld::server {

// Installs the handler (idempotent; before the server starts).
void RouteGrpcLogs();

}  // namespace kerneld::server
