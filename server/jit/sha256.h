// SHA-256 through OpenSSL's EVP interface (libcrypto, which gRPC's TLS
// already brings): the JIT cache's keys and its entries' checksums.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kerneld::server::jit {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // Length-prefixed: Field("ab") then Field("c") differs from Field("a")
  // then Field("bc"), which plain concatenation would not.
  void Field(std::string_view bytes);
  Digest Final();

  static Digest Of(std::string_view bytes);
  static std::string Hex(const Digest& d);

 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace kerneld::server::jit
