#include "service/buffer_service.h"

#include "auth/authenticator.h"
#include "auth/local_peer.h"
#include "auth/principal_stats.h"
#include "buffers/buffer_sources.h"
#include "service/kernel_service.h"

namespace kerneld::server {

namespace {

constexpr uint32_t kMaxLeaseSeconds = 7 * 24 * 3600;

// A buffer's display name is stored and listed for as long as it lives:
// bounded, like every client string.
constexpr size_t kMaxBufferName = 256;

Status CheckLeaseAndName(uint32_t lease, const std::string& name) {
  if (name.size() > kMaxBufferName)
    return InvalidArgument("name has " + std::to_string(name.size()) + " bytes; at most " +
                           std::to_string(kMaxBufferName));
  if (lease > kMaxLeaseSeconds)
    return InvalidArgument("lease_seconds " + std::to_string(lease) + " exceeds the maximum " +
                           std::to_string(kMaxLeaseSeconds) +
                           " (7 days); renew with RenewLease instead");
  return Status::Ok();
}

}  // namespace

BufferQuota ToBufferQuota(const Quota& q) {
  return BufferQuota{static_cast<uint64_t>(q.max_bytes), static_cast<uint64_t>(q.max_buffers)};
}

Status CountedQuota(Status st) {
  if (st.code() == StatusCode::kResourceExhausted && st.message().rfind("quota ", 0) == 0)
    PrincipalStats::Global().CountQuotaExceeded(st.message().rfind("quota max_buffers", 0) == 0
                                                    ? PrincipalStats::Quota::kBuffers
                                                    : PrincipalStats::Quota::kBytes);
  return st;
}

bool ClientBuffersAllowed(const Config& cfg, std::string* why_not) {
  if (cfg.allow_client_buffers) return true;
  std::vector<std::string> addrs = {cfg.listen};
  addrs.insert(addrs.end(), cfg.extra_listen.begin(), cfg.extra_listen.end());
  addrs.insert(addrs.end(), cfg.tls_listen.begin(), cfg.tls_listen.end());
  for (const auto& a : addrs) {
    if (!IsLocalAddress(a)) {
      *why_not = "client buffer registration is off because kerneld listens on " + a +
                 ", which is not loopback or a unix socket, and this call carries no identity "
                 "(bearer token, "
                 "client certificate or unix-socket uid); start kerneld with "
                 "--allow_client_buffers to enable it";
      return false;
    }
  }
  return true;
}

BufferHandlers::BufferHandlers(const Config& cfg, const DeviceManager& devices,
                               BufferRegistry& registry)
    : cfg_(cfg), devices_(devices), registry_(registry) {
  client_buffers_allowed_ = ClientBuffersAllowed(cfg_, &client_buffers_why_not_);
}

void BufferHandlers::SetServerPorts(std::vector<int> ports) {
  std::lock_guard<std::mutex> lock(ports_mu_);
  ports_ = std::move(ports);
}

Status BufferHandlers::Caller(const grpc::ServerContextBase& ctx, bool client_memory,
                              Identity* id) const {
  KERNELD_RETURN_IF_ERROR(IdentifyCall(ctx, id));
  if (client_memory && id->anonymous() && !client_buffers_allowed_) {
    PrincipalStats::Global().CountPermissionDenied();
    return {StatusCode::kPermissionDenied, client_buffers_why_not_};
  }
  return Status::Ok();
}

ShmAccessCheck BufferHandlers::AccessCheckFor(const grpc::ServerContextBase& ctx,
                                              const Identity& id) const {
  std::optional<uid_t> uid = id.uid;
  std::optional<gid_t> gid = id.gid;
  if (!uid) {  // a TCP caller on this machine: the owner of its socket
    std::vector<int> ports;
    {
      std::lock_guard<std::mutex> lock(ports_mu_);
      ports = ports_;
    }
    uid = LocalTcpPeerUid(ctx.peer(), ports);
  }
  return [uid, gid, peer = ctx.peer()](const struct stat& st) {
    std::string why = MayReadWrite(st, uid, gid);
    if (!why.empty() && !uid) why += " [peer " + Sanitize(peer) + "]";
    if (!why.empty()) PrincipalStats::Global().CountPermissionDenied();
    return why;
  };
}

Status BufferHandlers::FindGpu(const std::string& name, DeviceInfo* out) const {
  if (name.empty())
    return InvalidArgument("no device given; name a GPU as cuda:N, cuda:<uuid> or its uuid");
  Status err;
  DeviceWorker* w = devices_.Find(name, &err);
  if (w == nullptr) return err;
  if (!w->info().device.is_cuda())
    return InvalidArgument("device " + Quote(name) +
                           " is not a GPU; shared memory is registered with RegisterSharedMemory");
  if (!w->healthy()) return Unavailable(w->info().device.ToString() + " is unhealthy");
  *out = w->info();
  return Status::Ok();
}

Status BufferHandlers::AddRegion(std::shared_ptr<Region> r, const Identity& id,
                                 const std::string& name, uint32_t lease_seconds,
                                 std::string* buffer_id) {
  r->name = name;
  r->owner = id.principal;
  r->lease_seconds = lease_seconds;
  return CountedQuota(registry_.Add(std::move(r), ToBufferQuota(id.quota), buffer_id));
}

Status BufferHandlers::RegisterCudaIpcBuffer(const grpc::ServerContextBase& ctx,
                                             const v1::RegisterCudaIpcBufferRequest& req,
                                             v1::RegisterCudaIpcBufferResponse* resp) {
  Identity id;
  if (Status st = Caller(ctx, true, &id); !st.ok()) return st;
  if (req.ipc_handle().size() != 64)
    return InvalidArgument("ipc_handle has " + std::to_string(req.ipc_handle().size()) +
                           " bytes; a cudaIpcMemHandle_t has exactly 64");
  if (Status st = CheckLeaseAndName(req.lease_seconds(), req.name()); !st.ok()) return st;
  DeviceInfo dev;
  if (req.device_uuid().empty())
    return InvalidArgument("device_uuid is empty; pass the GPU's UUID (GPU-...)");
  if (Status st = FindGpu(req.device_uuid(), &dev); !st.ok()) return st;
  const BufferQuota quota = ToBufferQuota(id.quota);
  if (Status st = registry_.CheckQuota(id.principal, req.byte_size(), quota); !st.ok())
    return CountedQuota(st);
  // A CUDA IPC handle is a capability: whoever holds it may map the memory
  // (docs/security.md), so there is no owner to check it against.
  std::shared_ptr<Region> r;
  if (Status st = OpenCudaIpc(req.ipc_handle(), dev, req.byte_size(), &r); !st.ok()) return st;
  std::string buffer_id;
  if (Status st = AddRegion(std::move(r), id, req.name(), req.lease_seconds(), &buffer_id);
      !st.ok())
    return st;
  resp->set_buffer_id(buffer_id);
  return Status::Ok();
}

Status BufferHandlers::AllocateBuffer(const grpc::ServerContextBase& ctx,
                                      const v1::AllocateBufferRequest& req,
                                      v1::AllocateBufferResponse* resp) {
  Identity id;
  if (Status st = Caller(ctx, false, &id); !st.ok()) return st;
  if (Status st = CheckLeaseAndName(req.lease_seconds(), req.name()); !st.ok()) return st;
  const BufferQuota quota = ToBufferQuota(id.quota);
  // Before the allocation: a principal over its quota costs no GPU memory.
  if (Status st = registry_.CheckQuota(id.principal, req.byte_size(), quota); !st.ok())
    return CountedQuota(st);
  DeviceInfo dev;
  if (Status st = FindGpu(req.device(), &dev); !st.ok()) return st;
  std::shared_ptr<Region> r;
  std::string handle;
  if (Status st = AllocateCuda(dev, req.byte_size(), &r, &handle); !st.ok()) return st;
  std::string buffer_id;
  if (Status st = AddRegion(std::move(r), id, req.name(), req.lease_seconds(), &buffer_id);
      !st.ok())
    return st;
  resp->set_device_uuid(dev.uuid);
  resp->set_ipc_handle(handle);
  resp->set_buffer_id(buffer_id);
  return Status::Ok();
}

Status BufferHandlers::RegisterSharedMemory(const grpc::ServerContextBase& ctx,
                                            const v1::RegisterSharedMemoryRequest& req,
                                            v1::RegisterSharedMemoryResponse* resp) {
  Identity id;
  if (Status st = Caller(ctx, true, &id); !st.ok()) return st;
  if (Status st = CheckLeaseAndName(req.lease_seconds(), req.name()); !st.ok()) return st;
  const BufferQuota quota = ToBufferQuota(id.quota);
  if (Status st = registry_.CheckQuota(id.principal, req.byte_size(), quota); !st.ok())
    return CountedQuota(st);
  std::shared_ptr<Region> r;
  if (Status st = OpenSharedMemory(req.shm_name(), req.offset(), req.byte_size(),
                                   AccessCheckFor(ctx, id), &r);
      !st.ok())
    return st;
  std::string buffer_id;
  if (Status st = AddRegion(std::move(r), id, req.name().empty() ? req.shm_name() : req.name(),
                            req.lease_seconds(), &buffer_id);
      !st.ok())
    return st;
  resp->set_buffer_id(buffer_id);
  return Status::Ok();
}

Status BufferHandlers::UnregisterBuffer(const grpc::ServerContextBase& ctx,
                                        const v1::UnregisterBufferRequest& req,
                                        v1::UnregisterBufferResponse* resp) {
  Identity id;
  if (Status st = Caller(ctx, false, &id); !st.ok()) return st;
  bool deferred = false;
  // An admin may unregister anyone's buffer; a user only its own.
  Status st = registry_.Unregister(id.principal, req.buffer_id(), &deferred, id.admin());
  resp->set_deferred(deferred);
  return st;
}

Status BufferHandlers::RenewLease(const grpc::ServerContextBase& ctx,
                                  const v1::RenewLeaseRequest& req, v1::RenewLeaseResponse* resp) {
  Identity id;
  if (Status st = Caller(ctx, false, &id); !st.ok()) return st;
  std::shared_ptr<Region> r;
  Status st = registry_.Renew(id.principal, req.buffer_id(), &r);
  if (st.ok()) {
    resp->set_lease_seconds(r->lease_seconds);
    if (r->lease_seconds > 0)
      resp->set_expires_in_ms((r->expires_ns.load() - SteadyNowNs()) / 1000000);
  }
  return st;
}

Status BufferHandlers::ListBuffers(const grpc::ServerContextBase& ctx,
                                   const v1::ListBuffersRequest& req,
                                   v1::ListBuffersResponse* resp) {
  Identity id;
  if (Status st = Caller(ctx, false, &id); !st.ok()) return st;
  if (req.all_principals()) {
    if (Status st = Authenticator::RequireAdmin(id, "ListBuffers with all_principals"); !st.ok())
      return st;
  }
  const int64_t now = SteadyNowNs();
  for (const auto& r : req.all_principals() ? registry_.ListAll() : registry_.List(id.principal)) {
    v1::BufferInfo* b = resp->add_buffers();
    b->set_buffer_id(r->id);
    b->set_kind(std::string(BufferKindName(r->kind)));
    b->set_device(r->device.ToString());
    b->set_device_uuid(r->device_uuid);
    b->set_byte_size(r->size);
    b->set_name(r->name);
    b->set_owner(r->owner);
    b->set_lease_seconds(r->lease_seconds);
    if (r->lease_seconds > 0)
      b->set_expires_in_ms(std::max<int64_t>(0, (r->expires_ns.load() - now) / 1000000));
    b->set_inflight(r->inflight.load());
  }
  return Status::Ok();
}

grpc::ServerUnaryReactor* BufferServiceImpl::RegisterCudaIpcBuffer(
    grpc::CallbackServerContext* ctx, const v1::RegisterCudaIpcBufferRequest* req,
    v1::RegisterCudaIpcBufferResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(h_.RegisterCudaIpcBuffer(*ctx, *req, resp)));
  return r;
}

grpc::ServerUnaryReactor* BufferServiceImpl::AllocateBuffer(grpc::CallbackServerContext* ctx,
                                                            const v1::AllocateBufferRequest* req,
                                                            v1::AllocateBufferResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(h_.AllocateBuffer(*ctx, *req, resp)));
  return r;
}

grpc::ServerUnaryReactor* BufferServiceImpl::RegisterSharedMemory(
    grpc::CallbackServerContext* ctx, const v1::RegisterSharedMemoryRequest* req,
    v1::RegisterSharedMemoryResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(h_.RegisterSharedMemory(*ctx, *req, resp)));
  return r;
}

grpc::ServerUnaryReactor* BufferServiceImpl::UnregisterBuffer(
    grpc::CallbackServerContext* ctx, const v1::UnregisterBufferRequest* req,
    v1::UnregisterBufferResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(h_.UnregisterBuffer(*ctx, *req, resp)));
  return r;
}

grpc::ServerUnaryReactor* BufferServiceImpl::RenewLease(grpc::CallbackServerContext* ctx,
                                                        const v1::RenewLeaseRequest* req,
                                                        v1::RenewLeaseResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(h_.RenewLease(*ctx, *req, resp)));
  return r;
}

grpc::ServerUnaryReactor* BufferServiceImpl::ListBuffers(grpc::CallbackServerContext* ctx,
                                                         const v1::ListBuffersRequest* req,
                                                         v1::ListBuffersResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(h_.ListBuffers(*ctx, *req, resp)));
  return r;
}

grpc::Status BufferServiceSyncImpl::RegisterCudaIpcBuffer(
    grpc::ServerContext* ctx, const v1::RegisterCudaIpcBufferRequest* req,
    v1::RegisterCudaIpcBufferResponse* resp) {
  return ToGrpc(h_.RegisterCudaIpcBuffer(*ctx, *req, resp));
}

grpc::Status BufferServiceSyncImpl::AllocateBuffer(grpc::ServerContext* ctx,
                                                   const v1::AllocateBufferRequest* req,
                                                   v1::AllocateBufferResponse* resp) {
  return ToGrpc(h_.AllocateBuffer(*ctx, *req, resp));
}

grpc::Status BufferServiceSyncImpl::RegisterSharedMemory(grpc::ServerContext* ctx,
                                                         const v1::RegisterSharedMemoryRequest* req,
                                                         v1::RegisterSharedMemoryResponse* resp) {
  return ToGrpc(h_.RegisterSharedMemory(*ctx, *req, resp));
}

grpc::Status BufferServiceSyncImpl::UnregisterBuffer(grpc::ServerContext* ctx,
                                                     const v1::UnregisterBufferRequest* req,
                                                     v1::UnregisterBufferResponse* resp) {
  return ToGrpc(h_.UnregisterBuffer(*ctx, *req, resp));
}

grpc::Status BufferServiceSyncImpl::RenewLease(grpc::ServerContext* ctx,
                                               const v1::RenewLeaseRequest* req,
                                               v1::RenewLeaseResponse* resp) {
  return ToGrpc(h_.RenewLease(*ctx, *req, resp));
}

grpc::Status BufferServiceSyncImpl::ListBuffers(grpc::ServerContext* ctx,
                                                const v1::ListBuffersRequest* req,
                                                v1::ListBuffersResponse* resp) {
  return ToGrpc(h_.ListBuffers(*ctx, *req, resp));
}

}  // namespace kerneld::server
