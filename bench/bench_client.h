// What the service benches that drive a daemon as clients
// (graph_service_bench, user_kernel_bench) share: their command line,
// connections of their own, and how a failed call ends them.
#pragma once

#include <errno.h>  // program_invocation_short_name
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "client.h"

namespace kerneld::bench {

// Ends the bench with exit status 1: a call failed, said with the bench's
// name (the binary's, so that each bench needs no copy of this).
// std::_Exit, not exit: other client threads may be inside gRPC calls, and
// running static destructors under them crashed the bench (SIGSEGV) after
// the message.
[[noreturn]] inline void Fail(const std::string& what, const grpc::Status& st) {
  std::fprintf(stderr, "%s: %s: %s: %s\n", program_invocation_short_name, what.c_str(),
               client::StatusName(st.error_code()).c_str(), st.error_message().c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

// Waits for `channel` to be READY (at most 10 s; else the bench ends).
// With gRPC before 1.61 (grpc/grpc#35064) a connect still in progress can
// be taken for a failure ("No such file or directory"), and a call made
// then fails UNAVAILABLE; several connections opened at once meet it now
// and then. Waiting for READY rides out gRPC's retry of the connect.
inline void AwaitConnected(grpc::Channel& channel, const std::string& target) {
  if (channel.WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) return;
  std::fprintf(stderr, "%s: cannot connect to %s\n", program_invocation_short_name, target.c_str());
  std::_Exit(1);
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
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  AwaitConnected(*channel, target);
  return std::make_unique<client::KernelClient>(channel, std::move(opts));
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
