// KServe v2's shared-memory regions: names a client picks, each backed by a
// kerneld buffer registered through BufferHandlers, so the same principals,
// access checks (the caller must be able to open the object itself),
// quotas and connection lifetimes hold as for BufferService. System shared
// memory is RegisterSharedMemory (POSIX shm); CUDA shared memory is
// RegisterCudaIpcBuffer (a raw cudaIpcMemHandle_t on the server's GPU
// device_id). Names are per principal, like buffer ids: another principal's
// region answers exactly like an unknown one, and two principals may use
// the same name. A name is unique across both kinds, as in the protocol.
//
// The table only maps names to buffer ids; the registry owns the memory. A
// buffer that goes without an Unregister here (its connection closed, a
// kerneld.v1 UnregisterBuffer of its id) leaves a stale name, dropped by the
// next Status or Register of its principal.
#pragma once

#include <map>
#include <shared_mutex>
#include <string>

#include "auth/identity.h"
#include "buffers/buffer_registry.h"
#include "devices/device_manager.h"
#include "inference/grpc_service.pb.h"
#include "kserve/infer_codec.h"
#include "service/buffer_service.h"

namespace kerneld::server::kserve {

class ShmRegions {
 public:
  ShmRegions(BufferHandlers& handlers, BufferRegistry& registry, const DeviceManager& devices);

  Status RegisterSystem(const Identity& id,
                        const inference::SystemSharedMemoryRegisterRequest& req);
  Status RegisterCuda(const Identity& id, const inference::CudaSharedMemoryRegisterRequest& req);
  // `name` "" unregisters every region of the kind; an unknown name is OK
  // (nothing to do), as in the protocol.
  Status Unregister(const Identity& id, const std::string& name, bool cuda);
  Status SystemStatus(const Identity& id, const std::string& name,
                      inference::SystemSharedMemoryStatusResponse* out);
  Status CudaStatus(const Identity& id, const std::string& name,
                    inference::CudaSharedMemoryStatusResponse* out);

  // The infer decoder's lookup (RegionLookup) for `who`.
  Status Find(const Principal& who, const std::string& name, RegionRef* out) const;

 private:
  struct Entry {
    bool cuda = false;
    std::string buffer_id;  // "": being registered (the name is taken)
    std::string key;        // system: the shm object's name
    uint64_t offset = 0, byte_size = 0;
    int64_t device_id = 0;  // cuda
  };
  using Names = std::map<std::string, Entry, std::less<>>;

  // Takes `name` for `who` (ALREADY_EXISTS when a live region has it).
  Status Reserve(const Principal& who, const std::string& name);
  // Fills the reserved entry, or frees the name when `st` is not OK.
  Status Complete(const Principal& who, const std::string& name, Entry e, const Status& st);
  // Drops `who`'s names whose buffer is gone.
  void PruneLocked(const Principal& who);

  BufferHandlers& handlers_;
  BufferRegistry& registry_;
  const DeviceManager& devices_;
  mutable std::shared_mutex mu_;
  std::map<Principal, Names, std::less<>> regions_;
};

}  // namespace kerneld::server::kserve
