#include "service/buffer_service.h"

#include "buffers/buffer_sources.h"
#include "service/kernel_service.h"

namespace kerneld::server {

namespace {

constexpr uint32_t kMaxLeaseSeconds = 7 * 24 * 3600;

bool IsLocalAddress(const std::string& addr) {
  if (addr.rfind("unix:", 0) == 0) return true;
  std::string host = addr.substr(0, addr.rfind(':'));
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1";
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const Status& st) {
  auto* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(st));
  return r;
}

// A buffer's display name is stored and listed for as long as it lives:
// bounded, like every client string.
constexpr size_t kMaxBufferName = 256;

Status CheckLeaseAndName(uint32_t lease, const std::string& name) {
  if (name.size() > kMaxBufferName)
    return InvalidArgument("name has " + std::to_string(name.size()) + " bytes; at most " +
                           std::to_string(kMaxBufferName));
  if (lease > kMaxLeaseSeconds)
    return InvalidArgument("lease_seconds " + std::to_string(lease) + " exceeds the maximum " +
                           std::to_string(kMaxLeaseSeconds) + " (7 days); renew with RenewLease instead");
  return Status::Ok();
}

}  // namespace

Principal PrincipalOf(const grpc::CallbackServerContext*) { return kAnonymous; }

bool ClientBuffersAllowed(const Config& cfg, std::string* why_not) {
  if (cfg.allow_client_buffers) return true;
  std::vector<std::string> addrs = {cfg.listen};
  addrs.insert(addrs.end(), cfg.extra_listen.begin(), cfg.extra_listen.end());
  for (const auto& a : addrs) {
    if (!IsLocalAddress(a)) {
      *why_not = "client buffer registration is off because kerneld listens on " + a +
                 ", which is not loopback or a unix socket; start kerneld with --allow_client_buffers to enable it";
      return false;
    }
  }
  return true;
}

BufferServiceImpl::BufferServiceImpl(const Config& cfg, const DeviceManager& devices, BufferRegistry& registry)
    : cfg_(cfg), devices_(devices), registry_(registry) {
  client_buffers_allowed_ = ClientBuffersAllowed(cfg_, &client_buffers_why_not_);
}

Status BufferServiceImpl::FindGpu(const std::string& name, DeviceInfo* out) const {
  if (name.empty()) return InvalidArgument("no device given; name a GPU as cuda:N, cuda:<uuid> or its uuid");
  Status err;
  DeviceWorker* w = devices_.Find(name, &err);
  if (w == nullptr) return err;
  if (!w->info().device.is_cuda())
    return InvalidArgument("device " + Quote(name) + " is not a GPU; shared memory is registered with RegisterSharedMemory");
  if (!w->healthy()) return Unavailable(w->info().device.ToString() + " is unhealthy");
  *out = w->info();
  return Status::Ok();
}

grpc::ServerUnaryReactor* BufferServiceImpl::RegisterCudaIpcBuffer(grpc::CallbackServerContext* ctx,
                                                                   const v1::RegisterCudaIpcBufferRequest* req,
                                                                   v1::RegisterCudaIpcBufferResponse* resp) {
  if (!client_buffers_allowed_) return Done(ctx, {StatusCode::kPermissionDenied, client_buffers_why_not_});
  if (req->ipc_handle().size() != 64)
    return Done(ctx, InvalidArgument("ipc_handle has " + std::to_string(req->ipc_handle().size()) +
                                     " bytes; a cudaIpcMemHandle_t has exactly 64"));
  if (Status st = CheckLeaseAndName(req->lease_seconds(), req->name()); !st.ok()) return Done(ctx, st);
  DeviceInfo dev;
  if (req->device_uuid().empty()) return Done(ctx, InvalidArgument("device_uuid is empty; pass the GPU's UUID (GPU-...)"));
  if (Status st = FindGpu(req->device_uuid(), &dev); !st.ok()) return Done(ctx, st);
  std::shared_ptr<Region> r;
  if (Status st = OpenCudaIpc(req->ipc_handle(), dev, req->byte_size(), &r); !st.ok()) return Done(ctx, st);
  r->name = req->name();
  r->owner = PrincipalOf(ctx);
  r->lease_seconds = req->lease_seconds();
  resp->set_buffer_id(registry_.Add(std::move(r)));
  return Done(ctx, Status::Ok());
}

grpc::ServerUnaryReactor* BufferServiceImpl::AllocateBuffer(grpc::CallbackServerContext* ctx,
                                                            const v1::AllocateBufferRequest* req,
                                                            v1::AllocateBufferResponse* resp) {
  if (Status st = CheckLeaseAndName(req->lease_seconds(), req->name()); !st.ok()) return Done(ctx, st);
  DeviceInfo dev;
  if (Status st = FindGpu(req->device(), &dev); !st.ok()) return Done(ctx, st);
  std::shared_ptr<Region> r;
  std::string handle;
  if (Status st = AllocateCuda(dev, req->byte_size(), &r, &handle); !st.ok()) return Done(ctx, st);
  r->name = req->name();
  r->owner = PrincipalOf(ctx);
  r->lease_seconds = req->lease_seconds();
  resp->set_device_uuid(dev.uuid);
  resp->set_ipc_handle(handle);
  resp->set_buffer_id(registry_.Add(std::move(r)));
  return Done(ctx, Status::Ok());
}

grpc::ServerUnaryReactor* BufferServiceImpl::RegisterSharedMemory(grpc::CallbackServerContext* ctx,
                                                                  const v1::RegisterSharedMemoryRequest* req,
                                                                  v1::RegisterSharedMemoryResponse* resp) {
  if (!client_buffers_allowed_) return Done(ctx, {StatusCode::kPermissionDenied, client_buffers_why_not_});
  if (Status st = CheckLeaseAndName(req->lease_seconds(), req->name()); !st.ok()) return Done(ctx, st);
  std::shared_ptr<Region> r;
  if (Status st = OpenSharedMemory(req->shm_name(), req->offset(), req->byte_size(), &r); !st.ok())
    return Done(ctx, st);
  r->name = req->name().empty() ? req->shm_name() : req->name();
  r->owner = PrincipalOf(ctx);
  r->lease_seconds = req->lease_seconds();
  resp->set_buffer_id(registry_.Add(std::move(r)));
  return Done(ctx, Status::Ok());
}

grpc::ServerUnaryReactor* BufferServiceImpl::UnregisterBuffer(grpc::CallbackServerContext* ctx,
                                                              const v1::UnregisterBufferRequest* req,
                                                              v1::UnregisterBufferResponse* resp) {
  bool deferred = false;
  Status st = registry_.Unregister(PrincipalOf(ctx), req->buffer_id(), &deferred);
  resp->set_deferred(deferred);
  return Done(ctx, st);
}

grpc::ServerUnaryReactor* BufferServiceImpl::RenewLease(grpc::CallbackServerContext* ctx,
                                                        const v1::RenewLeaseRequest* req,
                                                        v1::RenewLeaseResponse* resp) {
  std::shared_ptr<Region> r;
  Status st = registry_.Renew(PrincipalOf(ctx), req->buffer_id(), &r);
  if (st.ok()) {
    resp->set_lease_seconds(r->lease_seconds);
    if (r->lease_seconds > 0) resp->set_expires_in_ms((r->expires_ns.load() - SteadyNowNs()) / 1000000);
  }
  return Done(ctx, st);
}

grpc::ServerUnaryReactor* BufferServiceImpl::ListBuffers(grpc::CallbackServerContext* ctx,
                                                         const v1::ListBuffersRequest*,
                                                         v1::ListBuffersResponse* resp) {
  const int64_t now = SteadyNowNs();
  for (const auto& r : registry_.List(PrincipalOf(ctx))) {
    v1::BufferInfo* b = resp->add_buffers();
    b->set_buffer_id(r->id);
    b->set_kind(std::string(BufferKindName(r->kind)));
    b->set_device(r->device.ToString());
    b->set_device_uuid(r->device_uuid);
    b->set_byte_size(r->size);
    b->set_name(r->name);
    b->set_owner(r->owner);
    b->set_lease_seconds(r->lease_seconds);
    if (r->lease_seconds > 0) b->set_expires_in_ms(std::max<int64_t>(0, (r->expires_ns.load() - now) / 1000000));
    b->set_inflight(r->inflight.load());
  }
  return Done(ctx, Status::Ok());
}

}  // namespace kerneld::server
