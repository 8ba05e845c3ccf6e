#include "kserve/shm_regions.h"

#include <mutex>
#include <set>

namespace kerneld::server::kserve {

namespace {

// As BufferService bounds a buffer's name (it is kept as the buffer's).
constexpr size_t kMaxRegionName = 256;

Status CheckName(const std::string& name) {
  if (name.empty()) return InvalidArgument("the region's name is empty");
  if (name.size() > kMaxRegionName)
    return InvalidArgument("the region's name has " + std::to_string(name.size()) +
                           " bytes; at most " + std::to_string(kMaxRegionName));
  return Status::Ok();
}

}  // namespace

ShmRegions::ShmRegions(BufferHandlers& handlers, BufferRegistry& registry,
                       const DeviceManager& devices)
    : handlers_(handlers), registry_(registry), devices_(devices) {}

void ShmRegions::PruneLocked(const Principal& who) {
  auto p = regions_.find(who);
  if (p == regions_.end()) return;
  std::set<std::string, std::less<>> live;
  for (const auto& r : registry_.List(who)) live.insert(r->id);
  for (auto it = p->second.begin(); it != p->second.end();) {
    const bool stale = !it->second.buffer_id.empty() && !live.contains(it->second.buffer_id);
    it = stale ? p->second.erase(it) : std::next(it);
  }
  if (p->second.empty()) regions_.erase(p);
}

Status ShmRegions::Reserve(const Principal& who, const std::string& name) {
  KERNELD_RETURN_IF_ERROR(CheckName(name));
  std::unique_lock lock(mu_);
  PruneLocked(who);
  Names& names = regions_[who];
  if (names.contains(name))
    return {StatusCode::kAlreadyExists,
            "shared-memory region " + Quote(name) + " is already registered; unregister it first"};
  names.emplace(name, Entry{});
  return Status::Ok();
}

Status ShmRegions::Complete(const Principal& who, const std::string& name, Entry e,
                            const Status& st) {
  std::unique_lock lock(mu_);
  auto p = regions_.find(who);
  if (p == regions_.end()) return st;  // cannot happen: only Complete frees a reserved name
  if (st.ok()) {
    p->second[name] = std::move(e);
  } else {
    p->second.erase(name);
    if (p->second.empty()) regions_.erase(p);
  }
  return st;
}

Status ShmRegions::RegisterSystem(const Identity& id,
                                  const inference::SystemSharedMemoryRegisterRequest& req) {
  KERNELD_RETURN_IF_ERROR(Reserve(id.principal, req.name()));
  Entry e;
  // POSIX names start with one slash; "x" and "/x" are the same object.
  e.key = !req.key().empty() && req.key()[0] == '/' ? req.key() : "/" + req.key();
  e.offset = req.offset();
  e.byte_size = req.byte_size();
  v1::RegisterSharedMemoryRequest r;
  r.set_shm_name(e.key);
  r.set_offset(req.offset());
  r.set_byte_size(req.byte_size());
  r.set_name(req.name());
  v1::RegisterSharedMemoryResponse resp;
  Status st = handlers_.RegisterSharedMemory(id, r, &resp);
  if (!st.ok()) st = Status(st.code(), "region " + Quote(req.name()) + ": " + st.message());
  e.buffer_id = resp.buffer_id();
  return Complete(id.principal, req.name(), std::move(e), st);
}

Status ShmRegions::RegisterCuda(const Identity& id,
                                const inference::CudaSharedMemoryRegisterRequest& req) {
  bool gpu = false;
  for (const DeviceInfo& d : devices_.Devices()) gpu = gpu || d.device.is_cuda();
  if (!gpu)
    return {StatusCode::kFailedPrecondition,
            "CUDA shared memory needs a GPU, and this kerneld serves none (" +
                (devices_.cuda().status.empty() ? std::string("no CUDA device")
                                                : devices_.cuda().status) +
                "); register system shared memory instead"};
  if (req.raw_handle().size() != 64)
    return InvalidArgument("raw_handle has " + std::to_string(req.raw_handle().size()) +
                           " bytes; a cudaIpcMemHandle_t has exactly 64");
  if (req.device_id() < 0)
    return InvalidArgument("device_id " + std::to_string(req.device_id()) + " is negative");
  KERNELD_RETURN_IF_ERROR(Reserve(id.principal, req.name()));
  Entry e;
  e.cuda = true;
  e.byte_size = req.byte_size();
  e.device_id = req.device_id();
  v1::RegisterCudaIpcBufferRequest r;
  r.set_ipc_handle(req.raw_handle());
  // The server's ordinal, as the protocol has it (kerneld.v1 takes a UUID).
  r.set_device_uuid("cuda:" + std::to_string(req.device_id()));
  r.set_byte_size(req.byte_size());
  r.set_name(req.name());
  v1::RegisterCudaIpcBufferResponse resp;
  Status st = handlers_.RegisterCudaIpcBuffer(id, r, &resp);
  if (!st.ok()) st = Status(st.code(), "region " + Quote(req.name()) + ": " + st.message());
  e.buffer_id = resp.buffer_id();
  return Complete(id.principal, req.name(), std::move(e), st);
}

Status ShmRegions::Unregister(const Identity& id, const std::string& name, bool cuda) {
  std::vector<std::string> ids;
  {
    std::unique_lock lock(mu_);
    auto p = regions_.find(id.principal);
    if (p == regions_.end()) return Status::Ok();
    for (auto it = p->second.begin(); it != p->second.end();) {
      const bool match = it->second.cuda == cuda && !it->second.buffer_id.empty() &&
                         (name.empty() || it->first == name);
      if (!match) {
        ++it;
        continue;
      }
      ids.push_back(it->second.buffer_id);
      it = p->second.erase(it);
    }
    if (p->second.empty()) regions_.erase(p);
  }
  // Outside the table's lock: the registry defers a buffer in use until its
  // last request lets go. One already gone (NOT_FOUND) is what was asked.
  for (const auto& buffer_id : ids) {
    v1::UnregisterBufferRequest r;
    r.set_buffer_id(buffer_id);
    v1::UnregisterBufferResponse resp;
    Status st = handlers_.UnregisterBuffer(id, r, &resp);
    if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  }
  return Status::Ok();
}

Status ShmRegions::SystemStatus(const Identity& id, const std::string& name,
                                inference::SystemSharedMemoryStatusResponse* out) {
  std::unique_lock lock(mu_);
  PruneLocked(id.principal);
  auto p = regions_.find(id.principal);
  if (p != regions_.end()) {
    for (const auto& [n, e] : p->second) {
      if (e.cuda || e.buffer_id.empty() || (!name.empty() && n != name)) continue;
      auto& s = (*out->mutable_regions())[n];
      s.set_name(n);
      s.set_key(e.key);
      s.set_offset(e.offset);
      s.set_byte_size(e.byte_size);
    }
  }
  if (!name.empty() && out->regions().empty())
    return NotFound("no system shared-memory region " + Quote(name) + " is registered");
  return Status::Ok();
}

Status ShmRegions::CudaStatus(const Identity& id, const std::string& name,
                              inference::CudaSharedMemoryStatusResponse* out) {
  std::unique_lock lock(mu_);
  PruneLocked(id.principal);
  auto p = regions_.find(id.principal);
  if (p != regions_.end()) {
    for (const auto& [n, e] : p->second) {
      if (!e.cuda || e.buffer_id.empty() || (!name.empty() && n != name)) continue;
      auto& s = (*out->mutable_regions())[n];
      s.set_name(n);
      s.set_device_id(static_cast<uint64_t>(e.device_id));
      s.set_byte_size(e.byte_size);
    }
  }
  if (!name.empty() && out->regions().empty())
    return NotFound("no CUDA shared-memory region " + Quote(name) + " is registered");
  return Status::Ok();
}

Status ShmRegions::Find(const Principal& who, const std::string& name, RegionRef* out) const {
  {
    std::shared_lock lock(mu_);
    auto p = regions_.find(who);
    if (p != regions_.end()) {
      auto it = p->second.find(name);
      if (it != p->second.end() && !it->second.buffer_id.empty()) {
        out->buffer_id = it->second.buffer_id;
        out->byte_size = it->second.byte_size;
        return Status::Ok();
      }
    }
  }
  return NotFound("no shared-memory region " + Quote(name) +
                  " is registered (SystemSharedMemoryRegister or CudaSharedMemoryRegister "
                  "first)");
}

}  // namespace kerneld::server::kserve
