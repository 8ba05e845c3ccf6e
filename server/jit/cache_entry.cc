#include "jit/cache_entry.h"

#include <cstring>

#include "jit/sha256.h"

namespace kerneld::server::jit {

namespace {

constexpr std::string_view kMagic("KDJIT01\n", 8);
constexpr size_t kHeader = 8 + 8 + 32;
// No module comes near this; a larger count or length is corruption.
constexpr uint64_t kMaxField = uint64_t{1} << 32;

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void PutString(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s);
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool U64(uint64_t* v) {
    if (b_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t{static_cast<uint8_t>(b_[i])} << (8 * i);
    b_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint64_t n = 0;
    if (!U64(&n) || n > b_.size()) return false;
    s->assign(b_.substr(0, n));
    b_.remove_prefix(n);
    return true;
  }
  bool done() const { return b_.empty(); }

 private:
  std::string_view b_;
};

}  // namespace

std::string SerializeEntry(const std::string& key, const CompiledModule& module) {
  std::string payload;
  PutString(&payload, key);
  PutU64(&payload, module.symbols.size());
  for (const auto& [expr, sym] : module.symbols) {
    PutString(&payload, expr);
    PutString(&payload, sym);
  }
  PutString(&payload, module.cubin);
  std::string out(kMagic);
  PutU64(&out, payload.size());
  const Sha256::Digest d = Sha256::Of(payload);
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  out += payload;
  return out;
}

bool ParseEntry(std::string_view bytes, const std::string& key, CompiledModule* out,
                std::string* why) {
  *out = CompiledModule();
  if (bytes.size() < kHeader || bytes.substr(0, 8) != kMagic) {
    *why = bytes.size() < kHeader ? "shorter than its header" : "not a kerneld JIT entry";
    return false;
  }
  uint64_t size = 0;
  Reader(bytes.substr(8, 8)).U64(&size);
  const std::string_view payload = bytes.substr(kHeader);
  if (payload.size() != size) {
    *why = "payload of " + std::to_string(payload.size()) + " bytes, header says " +
           std::to_string(size) + " (truncated or extended)";
    return false;
  }
  const Sha256::Digest d = Sha256::Of(payload);
  if (std::memcmp(d.data(), bytes.data() + 16, d.size()) != 0) {
    *why = "checksum mismatch";
    return false;
  }
  Reader r(payload);
  std::string stored_key;
  uint64_t n = 0;
  if (!r.String(&stored_key) || !r.U64(&n) || n > kMaxField) {
    *why = "malformed payload";
    return false;
  }
  if (stored_key != key) {
    *why = "entry of another key";
    return false;
  }
  for (uint64_t i = 0; i < n; ++i) {
    std::string expr, sym;
    if (!r.String(&expr) || !r.String(&sym)) {
      *why = "malformed payload";
      return false;
    }
    out->symbols.emplace_back(std::move(expr), std::move(sym));
  }
  if (!r.String(&out->cubin) || !r.done() || out->cubin.empty()) {
    *why = "malformed payload";
    return false;
  }
  return true;
}

}  // namespace kerneld::server::jit
