// buffer_ref_fuzz: the buffer registry under a fuzzed sequence of Add,
// Resolve (buffer_id, offset, nbytes, align), Unregister, Renew, lease
// expiry and pin releases.
//
// Checked on every step: a resolve succeeds exactly when a plain 128-bit
// reference says the reference is in bounds and aligned and the id is the
// caller's live buffer; the pointer is base + offset, and its first and
// last byte are touched (regions are heap blocks of their exact size, so
// ASan sees any overrun); a failed resolve pins nothing; another principal's
// buffer answers like an unknown one; and every region is released exactly
// once, only after its last pin dropped.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffers/buffer_registry.h"

namespace {

using kerneld::StatusCode;
using kerneld::server::BufferRegistry;
using kerneld::server::Region;
using kerneld::server::RegionPin;

struct Tracked {
  std::string id;
  std::string owner;
  uint64_t size = 0;
  char* base = nullptr;
  bool registered = true;
};

uint64_t PickU64(FuzzedDataProvider& in, uint64_t region_size) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return 0;
    case 1:
      return region_size;
    case 2:
      return region_size -
             in.ConsumeIntegralInRange<uint64_t>(0, 16);  // may wrap: that is a case too
    case 3:
      return in.ConsumeIntegralInRange<uint64_t>(0, 2 * region_size + 16);
    case 4:
      return ~uint64_t{0} - in.ConsumeIntegralInRange<uint64_t>(0, 16);
    default:
      return in.ConsumeIntegral<uint64_t>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  static const std::string kPrincipals[] = {kerneld::server::kAnonymous, "mallory"};
  int released = 0, added = 0;
  int release_count[16] = {};  // by region index
  {
    BufferRegistry reg(/*start_reaper=*/false);
    std::vector<Tracked> regions;
    std::vector<RegionPin> pins;
    volatile char sink = 0;
    for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
      switch (in.ConsumeIntegralInRange<int>(0, 6)) {
        case 0: {  // Add
          if (regions.size() >= 16) break;
          Tracked t;
          t.size = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 64)
                                    : in.ConsumeIntegralInRange<uint64_t>(0, 4096);
          t.owner = kPrincipals[in.ConsumeIntegralInRange<int>(0, 1)];
          char* mem = new char[t.size > 0 ? t.size : 1];
          t.base = mem;
          auto r = std::make_shared<Region>();
          r->base = mem;
          r->size = t.size;
          r->owner = t.owner;
          r->device = kerneld::Device::Cpu();
          r->lease_seconds = in.ConsumeBool() ? 1 : 0;
          int* count = &release_count[regions.size()];
          r->release = [mem, count, &released] {
            ++*count;
            ++released;
            delete[] mem;
          };
          t.id = reg.Add(std::move(r));
          ++added;
          regions.push_back(std::move(t));
          break;
        }
        case 1:
        case 2: {  // Resolve
          Tracked* t = nullptr;
          std::string id;
          if (!regions.empty() && in.ConsumeBool()) {
            t = &regions[in.ConsumeIntegralInRange<size_t>(0, regions.size() - 1)];
            id = t->id;
          } else {
            id = in.ConsumeRandomLengthString(48);
          }
          const std::string& who = kPrincipals[in.ConsumeIntegralInRange<int>(0, 1)];
          const uint64_t rsize = t ? t->size : 64;
          const uint64_t offset = PickU64(in, rsize);
          const uint64_t nbytes = PickU64(in, rsize);
          static const uint64_t kAligns[] = {0, 1, 2, 4, 8, 16, 3, ~uint64_t{0}};
          const uint64_t align = kAligns[in.ConsumeIntegralInRange<int>(0, 7)];
          RegionPin pin;
          char* p = nullptr;
          kerneld::Status st = reg.Resolve(who, id, offset, nbytes, align, &pin, &p);
          const bool live = t != nullptr && t->registered && t->owner == who;
          const unsigned __int128 end = static_cast<unsigned __int128>(offset) + nbytes;
          // Alignment is of the real address (a region may start off
          // alignment; buffer_registry.cc checks base + offset).
          const bool fits = t != nullptr && end <= t->size &&
                            (align <= 1 || (reinterpret_cast<uintptr_t>(t->base) + offset) % align == 0);
          if (st.ok() != (live && fits)) __builtin_trap();
          if (!live && st.code() != StatusCode::kNotFound)
            __builtin_trap();  // unknown and foreign alike
          if (!st.ok()) {
            if (pin.region() != nullptr) __builtin_trap();
            if (st.message().empty()) __builtin_trap();
            break;
          }
          if (p != t->base + offset || pin.region() == nullptr) __builtin_trap();
          if (nbytes > 0) {
            p[0] = 1;
            sink = p[nbytes - 1];
          }
          if (in.ConsumeBool()) pins.push_back(std::move(pin));
          break;
        }
        case 3: {  // Unregister
          if (regions.empty()) break;
          Tracked& t = regions[in.ConsumeIntegralInRange<size_t>(0, regions.size() - 1)];
          const std::string& who = kPrincipals[in.ConsumeIntegralInRange<int>(0, 1)];
          bool deferred = false;
          kerneld::Status st = reg.Unregister(who, t.id, &deferred);
          if (st.ok() != (t.registered && t.owner == who)) __builtin_trap();
          if (st.ok()) t.registered = false;
          break;
        }
        case 4: {  // drop a pin
          if (pins.empty()) break;
          size_t i = in.ConsumeIntegralInRange<size_t>(0, pins.size() - 1);
          pins.erase(pins.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
        case 5: {  // Renew
          if (regions.empty()) break;
          Tracked& t = regions[in.ConsumeIntegralInRange<size_t>(0, regions.size() - 1)];
          std::shared_ptr<Region> r;
          kerneld::Status st = reg.Renew(t.owner, t.id, &r);
          if (st.ok() != t.registered) __builtin_trap();
          break;
        }
        case 6: {  // leases (1 s: a slow run may see one expire), listing sees only the caller's
          if (reg.ExpireLeases() != 0) {
            for (auto& t : regions) {
              bool listed = false;
              for (const auto& r : reg.ListAll()) listed = listed || r->id == t.id;
              t.registered = listed;
            }
          }
          size_t mine = 0;
          for (const auto& t : regions) mine += t.registered && t.owner == kPrincipals[0];
          if (reg.List(kPrincipals[0]).size() != mine) __builtin_trap();
          break;
        }
      }
      // Released only once nothing references the region.
      for (size_t i = 0; i < regions.size(); ++i)
        if (release_count[i] != 0 && regions[i].registered) __builtin_trap();
    }
    (void)sink;
  }
  // Registry and pins gone: everything released, exactly once.
  if (released != added) __builtin_trap();
  for (int i = 0; i < added; ++i)
    if (release_count[i] != 1) __builtin_trap();
  return 0;
}
