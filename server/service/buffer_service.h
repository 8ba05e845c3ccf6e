// kerneld.v1.BufferService: register, allocate, list, renew and unregister
// shared buffers. Handlers are short (an mmap, an IPC open) and run inline.
// BufferHandlers holds the logic; BufferServiceImpl serves it on gRPC's
// callback API and BufferServiceSyncImpl on the sync one (--grpc_api=sync,
// where one callback method anywhere in the server costs every request its
// polling threads: sync_service.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <vector>

#include "auth/identity.h"
#include "buffers/buffer_registry.h"
#include "buffers/buffer_sources.h"
#include "config.h"
#include "devices/device_manager.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/raw_unary.h"

namespace kerneld::server {

// Whether clients without an identity may register their own memory: yes
// when every listener is loopback / unix, otherwise only with
// --allow_client_buffers. Identified callers (token, client certificate,
// unix-socket uid) always may; what they may open is checked per object.
bool ClientBuffersAllowed(const Config& cfg, std::string* why_not);

class BufferHandlers {
 public:
  BufferHandlers(const Config& cfg, const DeviceManager& devices, BufferRegistry& registry);

  // The caller of ctx admitted (identified, rate limited), and whether it
  // may register client memory at all: what every BufferService call passes
  // before its message is parsed.
  Status Caller(const grpc::ServerContextBase& ctx, bool client_memory, Identity* id) const;

  // One per BufferService RPC, for the admitted caller `id`.
  Status RegisterCudaIpcBuffer(const Identity& id, const v1::RegisterCudaIpcBufferRequest& req,
                               v1::RegisterCudaIpcBufferResponse* resp);
  Status AllocateBuffer(const Identity& id, const v1::AllocateBufferRequest& req,
                        v1::AllocateBufferResponse* resp);
  Status RegisterSharedMemory(const Identity& id, const v1::RegisterSharedMemoryRequest& req,
                              v1::RegisterSharedMemoryResponse* resp);
  Status UnregisterBuffer(const Identity& id, const v1::UnregisterBufferRequest& req,
                          v1::UnregisterBufferResponse* resp);
  Status RenewLease(const Identity& id, const v1::RenewLeaseRequest& req,
                    v1::RenewLeaseResponse* resp);
  Status ListBuffers(const Identity& id, const v1::ListBuffersRequest& req,
                     v1::ListBuffersResponse* resp);

 private:
  Status FindGpu(const std::string& name, DeviceInfo* out) const;
  // Refuses a region of `bytes` that would put the caller over its quota
  // (counted in the principal stats), before anything is opened.
  Status CheckQuota(const Identity& id, uint64_t bytes) const;
  // Gives a freshly opened region its name, owner and lease, and adds it
  // under the caller's quota; *buffer_id names it (set only on success).
  Status AddRegion(std::shared_ptr<Region> r, const Identity& id, const std::string& name,
                   uint32_t lease_seconds, std::string* buffer_id);
  ShmAccessCheck AccessCheckFor(const Identity& id) const;
  const Config& cfg_;
  const DeviceManager& devices_;
  BufferRegistry& registry_;
  bool client_buffers_allowed_;
  std::string client_buffers_why_not_;
};

// Every method is served raw (service/raw_unary.h): the caller is admitted
// before its message is parsed.
using BufferServiceBase = v1::BufferService::WithRawCallbackMethod_RegisterCudaIpcBuffer<
    v1::BufferService::WithRawCallbackMethod_AllocateBuffer<
        v1::BufferService::WithRawCallbackMethod_RegisterSharedMemory<
            v1::BufferService::WithRawCallbackMethod_UnregisterBuffer<
                v1::BufferService::WithRawCallbackMethod_RenewLease<
                    v1::BufferService::WithRawCallbackMethod_ListBuffers<
                        v1::BufferService::Service>>>>>>;

// The service on gRPC's callback API (the default, --grpc_api=callback).
class BufferServiceImpl final : public BufferServiceBase {
 public:
  explicit BufferServiceImpl(BufferHandlers& h) : h_(h) {}
  grpc::ServerUnaryReactor* RegisterCudaIpcBuffer(grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* req,
                                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* AllocateBuffer(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* req,
                                           grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* RegisterSharedMemory(grpc::CallbackServerContext* ctx,
                                                 const grpc::ByteBuffer* req,
                                                 grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* UnregisterBuffer(grpc::CallbackServerContext* ctx,
                                             const grpc::ByteBuffer* req,
                                             grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* RenewLease(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListBuffers(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;

 private:
  BufferHandlers& h_;
};

// The same service on gRPC's sync API (--grpc_api=sync).
class BufferServiceSyncImpl final : public RawSyncService {
 public:
  explicit BufferServiceSyncImpl(BufferHandlers& h);

 private:
  BufferHandlers& h_;
};

}  // namespace kerneld::server
