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

Status BufferHandlers::Caller(const grpc::ServerContextBase& ctx, bool client_memory,
                              Identity* id) const {
  KERNELD_RETURN_IF_ERROR(AdmitCall(ctx, id));
  if (client_memory && id->anonymous() && !client_buffers_allowed_) {
    PrincipalStats::Global().CountPermissionDenied();
    return {StatusCode::kPermissionDenied, client_buffers_why_not_};
  }
  return Status::Ok();
}

ShmAccessCheck BufferHandlers::AccessCheckFor(const Identity& id) const {
  // The uid is the kernel's word (SO_PEERCRED) or the token's uid=, nothing
  // else: without one, only objects every user may open read-write.
  return [uid = id.uid, gid = id.gid](const struct stat& st) {
    std::string why = MayReadWrite(st, uid, gid);
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

Status BufferHandlers::CheckQuota(const Identity& id, uint64_t bytes) const {
  return CountedQuota(registry_.CheckQuota(id.principal, bytes, ToBufferQuota(id.quota)));
}

Status BufferHandlers::AddRegion(std::shared_ptr<Region> r, const Identity& id,
                                 const std::string& name, uint32_t lease_seconds,
                                 std::string* buffer_id) {
  r->name = name;
  r->owner = id.principal;
  r->lease_seconds = lease_seconds;
  return CountedQuota(registry_.Add(std::move(r), ToBufferQuota(id.quota), buffer_id));
}

Status BufferHandlers::RegisterCudaIpcBuffer(const Identity& id,
                                             const v1::RegisterCudaIpcBufferRequest& req,
                                             v1::RegisterCudaIpcBufferResponse* resp) {
  if (req.ipc_handle().size() != 64)
    return InvalidArgument("ipc_handle has " + std::to_string(req.ipc_handle().size()) +
                           " bytes; a cudaIpcMemHandle_t has exactly 64");
  if (Status st = CheckLeaseAndName(req.lease_seconds(), req.name()); !st.ok()) return st;
  DeviceInfo dev;
  if (req.device_uuid().empty())
    return InvalidArgument("device_uuid is empty; pass the GPU's UUID (GPU-...)");
  if (Status st = FindGpu(req.device_uuid(), &dev); !st.ok()) return st;
  if (Status st = CheckQuota(id, req.byte_size()); !st.ok()) return st;
  // A CUDA IPC handle is a capability: whoever holds it may map the memory
  // (docs/security.md), so there is no owner to check it against.
  std::shared_ptr<Region> r;
  if (Status st = OpenCudaIpc(req.ipc_handle(), dev, req.byte_size(), &r); !st.ok()) return st;
  return AddRegion(std::move(r), id, req.name(), req.lease_seconds(), resp->mutable_buffer_id());
}

Status BufferHandlers::AllocateBuffer(const Identity& id, const v1::AllocateBufferRequest& req,
                                      v1::AllocateBufferResponse* resp) {
  if (Status st = CheckLeaseAndName(req.lease_seconds(), req.name()); !st.ok()) return st;
  // Before the allocation: a principal over its quota costs no GPU memory.
  if (Status st = CheckQuota(id, req.byte_size()); !st.ok()) return st;
  DeviceInfo dev;
  if (Status st = FindGpu(req.device(), &dev); !st.ok()) return st;
  std::shared_ptr<Region> r;
  std::string handle;
  if (Status st = AllocateCuda(dev, req.byte_size(), &r, &handle); !st.ok()) return st;
  resp->set_device_uuid(dev.uuid);
  resp->set_ipc_handle(handle);
  return AddRegion(std::move(r), id, req.name(), req.lease_seconds(), resp->mutable_buffer_id());
}

Status BufferHandlers::RegisterSharedMemory(const Identity& id,
                                            const v1::RegisterSharedMemoryRequest& req,
                                            v1::RegisterSharedMemoryResponse* resp) {
  // Cheapest refusal first: the caller was admitted before its message was
  // parsed; then the request's own fields, then the quota; only then the
  // filesystem (shm_open, fstat, mmap).
  if (Status st = CheckLeaseAndName(req.lease_seconds(), req.name()); !st.ok()) return st;
  if (Status st = CheckSharedMemoryRequest(req.shm_name(), req.byte_size()); !st.ok()) return st;
  if (Status st = CheckQuota(id, req.byte_size()); !st.ok()) return st;
  std::shared_ptr<Region> r;
  if (Status st =
          OpenSharedMemory(req.shm_name(), req.offset(), req.byte_size(), AccessCheckFor(id), &r);
      !st.ok())
    return st;
  return AddRegion(std::move(r), id, req.name().empty() ? req.shm_name() : req.name(),
                   req.lease_seconds(), resp->mutable_buffer_id());
}

Status BufferHandlers::UnregisterBuffer(const Identity& id, const v1::UnregisterBufferRequest& req,
                                        v1::UnregisterBufferResponse* resp) {
  bool deferred = false;
  // An admin may unregister anyone's buffer; a user only its own.
  Status st = registry_.Unregister(id.principal, req.buffer_id(), &deferred, id.admin());
  resp->set_deferred(deferred);
  return st;
}

Status BufferHandlers::RenewLease(const Identity& id, const v1::RenewLeaseRequest& req,
                                  v1::RenewLeaseResponse* resp) {
  std::shared_ptr<Region> r;
  Status st = registry_.Renew(id.principal, req.buffer_id(), &r);
  if (st.ok()) {
    resp->set_lease_seconds(r->lease_seconds);
    if (r->lease_seconds > 0)
      resp->set_expires_in_ms((r->expires_ns.load() - SteadyNowNs()) / 1000000);
  }
  return st;
}

Status BufferHandlers::ListBuffers(const Identity& id, const v1::ListBuffersRequest& req,
                                   v1::ListBuffersResponse* resp) {
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

namespace {

// One BufferService call, raw: admitted (and allowed client memory or not),
// then parsed, then handled.
template <class Req, class Resp>
grpc::Status Serve(BufferHandlers& h, const grpc::ServerContextBase& ctx, bool client_memory,
                   Status (BufferHandlers::*handle)(const Identity&, const Req&, Resp*),
                   const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
  Identity id;
  if (Status st = h.Caller(ctx, client_memory, &id); !st.ok()) return ToGrpc(st);
  Req req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  Resp resp;
  if (Status st = (h.*handle)(id, req, &resp); !st.ok()) return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

}  // namespace

// The BufferService methods, each with whether it takes client memory:
// registering client memory (CUDA IPC, shared memory) needs an identity
// beyond loopback (ClientBuffersAllowed); the rest does not. Both services
// (callback and sync) expand this one list.
#define KERNELD_BUFFER_METHODS(X) \
  X(RegisterCudaIpcBuffer, true)  \
  X(AllocateBuffer, false)        \
  X(RegisterSharedMemory, true)   \
  X(UnregisterBuffer, false)      \
  X(RenewLease, false)            \
  X(ListBuffers, false)

#define KERNELD_BUFFER_METHOD(Method, client_memory)                                           \
  grpc::ServerUnaryReactor* BufferServiceImpl::Method(                                         \
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) { \
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();                                       \
    r->Finish(Serve(h_, *ctx, client_memory, &BufferHandlers::Method, *req, resp));            \
    return r;                                                                                  \
  }
KERNELD_BUFFER_METHODS(KERNELD_BUFFER_METHOD)
#undef KERNELD_BUFFER_METHOD

BufferServiceSyncImpl::BufferServiceSyncImpl(BufferHandlers& h) : h_(h) {
  const std::string svc = v1::BufferService::service_full_name();
#define KERNELD_BUFFER_METHOD(Method, client_memory)                                             \
  AddUnary(svc, #Method,                                                                         \
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) { \
             return Serve(h_, *ctx, client_memory, &BufferHandlers::Method, in, out);            \
           });
  KERNELD_BUFFER_METHODS(KERNELD_BUFFER_METHOD)
#undef KERNELD_BUFFER_METHOD
}

#undef KERNELD_BUFFER_METHODS

}  // namespace kerneld::server
