#include "jit/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>

namespace kerneld::server::jit {

namespace {

EVP_MD_CTX* Ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

// EVP fails only when out of memory or when the library is unusable; a key
// made from a partial hash would be wrong, so that stops the process.
void Check(int ok, const char* what) {
  if (ok != 1) {
    std::fprintf(stderr, "kerneld: OpenSSL %s failed\n", what);
    std::abort();
  }
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  Check(ctx_ != nullptr ? 1 : 0, "EVP_MD_CTX_new");
  Check(EVP_DigestInit_ex(Ctx(ctx_), EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256::~Sha256() { EVP_MD_CTX_free(Ctx(ctx_)); }

void Sha256::Update(std::string_view bytes) {
  Check(EVP_DigestUpdate(Ctx(ctx_), bytes.data(), bytes.size()), "EVP_DigestUpdate");
}

void Sha256::Field(std::string_view bytes) {
  uint8_t len[8];
  uint64_t n = bytes.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  Update(std::string_view(reinterpret_cast<const char*>(len), sizeof(len)));
  Update(bytes);
}

Sha256::Digest Sha256::Final() {
  Digest d{};
  unsigned int n = 0;
  Check(EVP_DigestFinal_ex(Ctx(ctx_), d.data(), &n), "EVP_DigestFinal_ex");
  return d;
}

Sha256::Digest Sha256::Of(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.Final();
}

std::string Sha256::Hex(const Digest& d) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : d) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

}  // namespace kerneld::server::jit
