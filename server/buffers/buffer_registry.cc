#include "buffers/buffer_registry.h"

#include <algorithm>
#include <random>

namespace kerneld::server {

std::string_view BufferKindName(BufferKind k) {
  switch (k) {
    case BufferKind::kCudaIpc:
      return "cuda_ipc";
    case BufferKind::kServerAllocated:
      return "server_allocated";
    case BufferKind::kSharedMemory:
      return "shared_memory";
  }
  return "?";
}

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {
void Touch(Region& r) {
  if (r.lease_seconds > 0)
    r.expires_ns.store(SteadyNowNs() + int64_t{r.lease_seconds} * 1000000000);
}

}  // namespace

Status FaultedStatus(const Region& r) {
  return FailedPrecondition(
      "buffer " + Quote(r.id) + " (" + Quote(r.name) +
      ") faulted: its owner shrank the shared-memory object while a request was using it, "
      "so kerneld replaced its mapping with zeros and will not use it again; unregister it "
      "and register it again");
}

Status CheckPinsAfterUse(const std::vector<RegionPin>& pins) {
  for (const RegionPin& p : pins)
    if (p.faulted()) return FaultedStatus(*p.region());
  return Status::Ok();
}

BufferRegistry::BufferRegistry(bool start_reaper) {
  if (start_reaper) reaper_ = std::thread([this] { ReaperLoop(); });
}

BufferRegistry::~BufferRegistry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
}

std::string BufferRegistry::Add(std::shared_ptr<Region> region) {
  std::string id;
  (void)Add(std::move(region), BufferQuota{}, &id);  // no quota: cannot fail
  return id;
}

Status BufferRegistry::CheckQuota(const Principal& who, uint64_t bytes,
                                  const BufferQuota& quota) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckQuotaLocked(who, bytes, quota);
}

Status BufferRegistry::CheckQuotaLocked(const Principal& who, uint64_t bytes,
                                        const BufferQuota& q) const {
  const std::string_view account = QuotaPrincipal(who);
  BufferUsage u;
  if (auto it = quota_usage_.find(account); it != quota_usage_.end()) u = it->second;
  // A connection's quota is that of every anonymous caller together.
  const std::string whose = Quote(std::string(account)) +
                            (account == who ? "" : " (every anonymous connection together)");
  if (q.max_buffers > 0 && u.buffers + 1 > q.max_buffers)
    return ResourceExhausted("quota max_buffers of principal " + whose + " reached: it holds " +
                             std::to_string(u.buffers) + " buffers of at most " +
                             std::to_string(q.max_buffers) +
                             "; unregister some, or ask the operator to raise it (--quota_buffers "
                             "or max_buffers= in the token file)");
  uint64_t total = 0;
  if (q.max_bytes > 0 && (__builtin_add_overflow(u.bytes, bytes, &total) || total > q.max_bytes))
    return ResourceExhausted(
        "quota max_bytes of principal " + whose + " exceeded: it holds " + std::to_string(u.bytes) +
        " bytes registered + allocated, this buffer adds " + std::to_string(bytes) +
        ", the limit is " + std::to_string(q.max_bytes) +
        "; unregister some, or ask the operator to raise it (--quota_bytes "
        "or max_bytes= in the token file)");
  return Status::Ok();
}

void BufferRegistry::UntrackLocked(const Region& r) {
  auto drop = [&r](auto& usage, auto key) {
    auto it = usage.find(key);
    if (it == usage.end()) return;
    it->second.bytes -= std::min(it->second.bytes, r.size);
    if (--it->second.buffers == 0) usage.erase(it);
  };
  drop(usage_, r.owner);
  drop(quota_usage_, QuotaPrincipal(r.owner));
}

std::map<Principal, BufferUsage> BufferRegistry::UsageByPrincipal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {quota_usage_.begin(), quota_usage_.end()};
}

Status BufferRegistry::Add(std::shared_ptr<Region> region, const BufferQuota& quota,
                           std::string* id) {
  // Ids are unguessable-ish so that a stale id from a restarted daemon does
  // not silently name another client's buffer.
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu_);
  if (owner_alive_ && IsConnectionPrincipal(region->owner) && !owner_alive_(region->owner))
    return Unavailable("the connection that registered this buffer closed; it was released");
  KERNELD_RETURN_IF_ERROR(CheckQuotaLocked(region->owner, region->size, quota));
  for (BufferUsage* u :
       {&usage_[region->owner], &quota_usage_[std::string(QuotaPrincipal(region->owner))]}) {
    u->bytes += region->size;
    u->buffers += 1;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "buf-%llu-%08llx", static_cast<unsigned long long>(next_id_++),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  region->id = buf;
  Touch(*region);
  regions_[region->id] = std::move(region);
  *id = buf;
  return Status::Ok();
}

std::string BufferRegistry::CheckBounds(uint64_t offset, uint64_t nbytes, uint64_t region_size,
                                        uint64_t align) {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, nbytes, &end) || end > region_size)
    return "offset " + std::to_string(offset) + " + " + std::to_string(nbytes) +
           " bytes exceeds the region's " + std::to_string(region_size) + " bytes";
  if (align > 1 && offset % align != 0)
    return "offset " + std::to_string(offset) + " is not a multiple of the element size " +
           std::to_string(align) + " (tensor of " + std::to_string(nbytes) +
           " bytes in a region of " + std::to_string(region_size) + ")";
  return "";
}

Status BufferRegistry::Find(const Principal& who, const std::string& id,
                            std::shared_ptr<Region>* out) const {
  auto it = regions_.find(id);
  // Another principal's buffer is reported exactly like a missing one: its
  // existence is not the caller's business.
  if (it == regions_.end() || it->second->owner != who)
    return NotFound("buffer " + Quote(id) +
                    " not found (never registered, unregistered, or its lease expired)");
  *out = it->second;
  return Status::Ok();
}

Status BufferRegistry::Resolve(const Principal& who, const std::string& buffer_id, uint64_t offset,
                               uint64_t nbytes, uint64_t align, RegionPin* pin, char** ptr) {
  return ResolveImpl(who, buffer_id, offset, nbytes, align, "", pin, ptr);
}

Status BufferRegistry::Resolve(const Principal& who, const std::string& buffer_id, uint64_t offset,
                               uint64_t nbytes, DType dtype, RegionPin* pin, char** ptr) {
  return ResolveImpl(who, buffer_id, offset, nbytes, ItemSize(dtype), DTypeName(dtype), pin, ptr);
}

Status BufferRegistry::ResolveImpl(const Principal& who, const std::string& buffer_id,
                                   uint64_t offset, uint64_t nbytes, uint64_t align,
                                   std::string_view dtype_name, RegionPin* pin, char** ptr) {
  std::shared_ptr<Region> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KERNELD_RETURN_IF_ERROR(Find(who, buffer_id, &r));
    // Pin under the lock: an Unregister racing with us either sees the pin
    // (and defers) or removed the id first (and we report NOT_FOUND).
    *pin = RegionPin(r);
  }
  // Alignment is checked below on the absolute address; here only bounds.
  if (std::string why = CheckBounds(offset, nbytes, r->size, 1); !why.empty()) {
    pin->Reset();
    return InvalidArgument("buffer " + Quote(buffer_id) + ": " + why);
  }
  // In bounds, so base + offset is inside the mapping (no wraparound).
  const uint64_t misalign = align > 1 ? (reinterpret_cast<uintptr_t>(r->base) + offset) % align : 0;
  if (misalign != 0) {
    const uint64_t base_mod = reinterpret_cast<uintptr_t>(r->base) % align;
    const std::string what = dtype_name.empty() ? "data" : std::string(dtype_name) + " data";
    pin->Reset();
    return InvalidArgument(
        "buffer " + Quote(buffer_id) + ": offset " + std::to_string(offset) + " places " + what +
        " at an address that is not a multiple of the element size " + std::to_string(align) +
        " (required alignment " + std::to_string(align) + " bytes; the region itself starts " +
        std::to_string(base_mod) + " bytes past such a boundary" +
        (base_mod != 0 ? ", so register it at an aligned offset" : "") + ")");
  }
  if (r->faulted()) {
    pin->Reset();
    return FaultedStatus(*r);
  }
  if (r->check) {
    if (Status st = r->check(); !st.ok()) {
      pin->Reset();
      return Status(st.code(), "buffer " + Quote(buffer_id) + ": " + st.message());
    }
  }
  Touch(*r);
  *ptr = r->base + offset;
  return Status::Ok();
}

Status BufferRegistry::Unregister(const Principal& who, const std::string& buffer_id,
                                  bool* deferred, bool any_owner) {
  std::shared_ptr<Region> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(buffer_id);
    KERNELD_RETURN_IF_ERROR(
        Find(any_owner && it != regions_.end() ? it->second->owner : who, buffer_id, &r));
    UntrackLocked(*r);
    regions_.erase(buffer_id);
  }
  *deferred = r->inflight.load() > 0;
  return Status::Ok();  // r's release runs when the last holder lets go
}

int BufferRegistry::ReleaseOwner(const Principal& who) {
  std::vector<std::shared_ptr<Region>> released;  // dropped outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (usage_.find(who) == usage_.end()) return 0;  // most connections hold none
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->second->owner == who) {
        UntrackLocked(*it->second);
        released.push_back(std::move(it->second));
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return static_cast<int>(released.size());
}

Status BufferRegistry::Renew(const Principal& who, const std::string& buffer_id,
                             std::shared_ptr<Region>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  KERNELD_RETURN_IF_ERROR(Find(who, buffer_id, out));
  Touch(**out);
  return Status::Ok();
}

std::vector<std::shared_ptr<Region>> BufferRegistry::List(const Principal& who) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Region>> out;
  for (const auto& [_, r] : regions_)
    if (r->owner == who) out.push_back(r);
  return out;
}

std::vector<std::shared_ptr<Region>> BufferRegistry::ListAll() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Region>> out;
  for (const auto& [_, r] : regions_) out.push_back(r);
  return out;
}

size_t BufferRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

int BufferRegistry::ExpireLeases() {
  std::vector<std::shared_ptr<Region>> expired;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = SteadyNowNs();
    for (auto it = regions_.begin(); it != regions_.end();) {
      Region& r = *it->second;
      // A region in use is not expired under its request's feet; it is
      // touched on use anyway.
      if (r.lease_seconds > 0 && r.expires_ns.load() <= now && r.inflight.load() == 0) {
        UntrackLocked(r);
        expired.push_back(std::move(it->second));
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return static_cast<int>(expired.size());
}

void BufferRegistry::ReaperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) break;
    lock.unlock();
    ExpireLeases();
    lock.lock();
  }
}

}  // namespace kerneld::server
