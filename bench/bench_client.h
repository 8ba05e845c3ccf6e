// What the service benches that drive a daemon as clients
// (graph_service_bench, user_kernel_bench) share: their command line,
// connections of their own, and how a failed call ends them.
#pragma once

#include <errno.h>  // program_invocation_short_name
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "client.h"

namespace kerneld::bench {

// Ends the bench with exit status 1: a call failed, said with the bench's
// name (the binary's, so that each bench needs no copy of this).
[[noreturn]] inline void Fail(const std::string& what, const grpc::Status& st) {
  std::fprintf(stderr, "%s: %s: %s: %s\n", program_invocation_short_name, what.c_str(),
               client::StatusName(st.error_code()).c_str(), st.error_message().c_str());
  std::exit(1);
}

// A connection of its own: clients of one process otherwise share one, and
// a bench that measures several clients or a side loop must not queue them
// behind each other on one HTTP/2 connection.
inline std::unique_ptr<client::KernelClient> Connect(const std::string& target, int n,
                                                     client::ClientOptions opts = {}) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kerneld.bench.connection", n);
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return std::make_unique<client::KernelClient>(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args), std::move(opts));
}

// Parses the command line into `app`'s options. Empty: go on. Otherwise
// the exit status: 0 after --help, 2 after a bad flag (said on stderr),
// the status the benches' scripts and docs give bad flags.
inline std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    (void)app.exit(e);
    return 2;
  }
}

}  // namespace kerneld::bench
