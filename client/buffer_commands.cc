#include "buffer_commands.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "cli_flags.h"
#include "credentials.h"

namespace kerneld::client {

const char kBuffersUsage[] =
    R"(  buffers list [--all]         your buffers (--all: every principal's; admin role)
  buffers register-shm NAME BYTES [--offset N] [--lease S]
                               register an existing POSIX shared-memory object; prints its id
  buffers renew ID             renew a buffer's lease
  buffers unregister ID        unregister a buffer (an admin: anyone's)
)";

namespace {

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "ERROR";
  }
}

int Refused(const grpc::Status& st) {
  // The code by name: scripts (and the tests) match on it.
  std::fprintf(stderr, "kernelctl: %s: %s\n", CodeName(st.error_code()),
               st.error_message().c_str());
  if (std::string hint = TlsConnectionHint(st, DefaultSecurity()); !hint.empty())
    std::fprintf(stderr, "kernelctl: %s\n", hint.c_str());
  return 1;
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "kernelctl: %s\nusage:\n%s", why.c_str(), kBuffersUsage);
  return 2;
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

}  // namespace

int BuffersCommand(KernelClient& c, std::vector<std::string> args) {
  if (!c.init_status().ok()) return Refused(c.init_status());
  if (args.empty()) return Usage("buffers needs a subcommand");
  const std::string sub = args[0];
  args.erase(args.begin());
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  Deadline(&ctx);
  if (sub == "list") {
    v1::ListBuffersRequest req;
    req.set_all_principals(TakeBool(args, "--all"));
    if (!args.empty()) return Usage("unexpected '" + args[0] + "'");
    v1::ListBuffersResponse resp;
    if (grpc::Status st = stub->ListBuffers(&ctx, req, &resp); !st.ok()) return Refused(st);
    std::printf("%-24s %-17s %-8s %12s %-20s %s\n", "id", "kind", "device", "bytes", "owner",
                "name");
    for (const auto& b : resp.buffers())
      std::printf("%-24s %-17s %-8s %12llu %-20s %s\n", b.buffer_id().c_str(), b.kind().c_str(),
                  b.device().c_str(), static_cast<unsigned long long>(b.byte_size()),
                  b.owner().c_str(), b.name().c_str());
    return 0;
  }
  if (sub == "register-shm") {
    const std::string offset = TakeFlag(args, "--offset", "0"),
                      lease = TakeFlag(args, "--lease", "0");
    v1::RegisterSharedMemoryRequest req;
    uint64_t bytes = 0, off = 0;
    uint32_t lease_s = 0;
    if (args.size() != 2 || !absl::SimpleAtoi(args[1], &bytes) || !absl::SimpleAtoi(offset, &off) ||
        !absl::SimpleAtoi(lease, &lease_s))
      return Usage("register-shm takes NAME BYTES (numbers for BYTES, --offset, --lease)");
    req.set_shm_name(args[0]);
    req.set_byte_size(bytes);
    req.set_offset(off);
    req.set_lease_seconds(lease_s);
    v1::RegisterSharedMemoryResponse resp;
    if (grpc::Status st = stub->RegisterSharedMemory(&ctx, req, &resp); !st.ok())
      return Refused(st);
    std::printf("%s\n", resp.buffer_id().c_str());
    return 0;
  }
  if (sub == "renew" || sub == "unregister") {
    if (args.size() != 1) return Usage(sub + " takes one buffer id");
    if (sub == "renew") {
      v1::RenewLeaseRequest req;
      req.set_buffer_id(args[0]);
      v1::RenewLeaseResponse resp;
      if (grpc::Status st = stub->RenewLease(&ctx, req, &resp); !st.ok()) return Refused(st);
      std::printf("renewed %s (lease %u s)\n", args[0].c_str(), resp.lease_seconds());
      return 0;
    }
    v1::UnregisterBufferRequest req;
    req.set_buffer_id(args[0]);
    v1::UnregisterBufferResponse resp;
    if (grpc::Status st = stub->UnregisterBuffer(&ctx, req, &resp); !st.ok()) return Refused(st);
    std::printf("unregistered %s%s\n", args[0].c_str(),
                resp.deferred() ? " (released when its requests finish)" : "");
    return 0;
  }
  return Usage("unknown buffers subcommand '" + sub + "'");
}

}  // namespace kerneld::client
