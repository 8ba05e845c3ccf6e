#include "buffer_commands.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cli_flags.h"
#include "credentials.h"

namespace kerneld::client {

namespace {

int Refused(const grpc::Status& st) {
  // The code by name: scripts (and the tests) match on it.
  std::fprintf(stderr, "kernelctl: %s: %s\n", StatusName(st.error_code()).c_str(),
               st.error_message().c_str());
  if (std::string hint = TlsConnectionHint(st, DefaultSecurity()); !hint.empty())
    std::fprintf(stderr, "kernelctl: %s\n", hint.c_str());
  return 1;
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

}  // namespace

CLI::App* AddBuffersCommand(CLI::App& app, BuffersOptions* o) {
  CLI::App* b =
      app.add_subcommand("buffers", "list, register, renew and unregister shared buffers");
  b->require_subcommand(1);
  o->list = b->add_subcommand("list", "your buffers (--all: every principal's; admin role)");
  o->list->add_flag("--all", o->all, "every principal's buffers (admin role)");
  o->register_shm = b->add_subcommand(
      "register-shm", "register an existing POSIX shared-memory object; prints its id");
  o->register_shm->add_option("NAME", o->name, "the object's name (/my-buffer)")
      ->type_name("NAME")
      ->required();
  o->register_shm->add_option("BYTES", o->bytes, "bytes to register")
      ->required()
      ->type_name("N")
      ->check(IntAtLeast(0));
  o->register_shm->add_option("--offset", o->offset, "where the buffer starts in the object")
      ->type_name("N")
      ->check(IntAtLeast(0))
      ->capture_default_str();
  o->register_shm->add_option("--lease", o->lease, "lease in seconds (0: the daemon's default)")
      ->type_name("N")
      ->check(IntAtLeast(0))
      ->capture_default_str();
  o->renew = b->add_subcommand("renew", "renew a buffer's lease");
  o->renew->add_option("ID", o->id, "the buffer id")->type_name("ID")->required();
  o->unregister = b->add_subcommand("unregister", "unregister a buffer (an admin: anyone's)");
  o->unregister->add_option("ID", o->id, "the buffer id")->type_name("ID")->required();
  return b;
}

int BuffersCommand(KernelClient& c, const BuffersOptions& o) {
  if (!c.init_status().ok()) return Refused(c.init_status());
  auto stub = v1::BufferService::NewStub(c.channel());
  grpc::ClientContext ctx;
  Deadline(&ctx);
  if (o.list->parsed()) {
    v1::ListBuffersRequest req;
    req.set_all_principals(o.all);
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
  if (o.register_shm->parsed()) {
    v1::RegisterSharedMemoryRequest req;
    req.set_shm_name(o.name);
    req.set_byte_size(o.bytes);
    req.set_offset(o.offset);
    req.set_lease_seconds(o.lease);
    v1::RegisterSharedMemoryResponse resp;
    if (grpc::Status st = stub->RegisterSharedMemory(&ctx, req, &resp); !st.ok())
      return Refused(st);
    std::printf("%s\n", resp.buffer_id().c_str());
    return 0;
  }
  if (o.renew->parsed()) {
    v1::RenewLeaseRequest req;
    req.set_buffer_id(o.id);
    v1::RenewLeaseResponse resp;
    if (grpc::Status st = stub->RenewLease(&ctx, req, &resp); !st.ok()) return Refused(st);
    std::printf("renewed %s (lease %u s)\n", o.id.c_str(), resp.lease_seconds());
    return 0;
  }
  v1::UnregisterBufferRequest req;
  req.set_buffer_id(o.id);
  v1::UnregisterBufferResponse resp;
  if (grpc::Status st = stub->UnregisterBuffer(&ctx, req, &resp); !st.ok()) return Refused(st);
  std::printf("unregistered %s%s\n", o.id.c_str(),
              resp.deferred() ? " (released when its requests finish)" : "");
  return 0;
}

}  // namespace kerneld::client
