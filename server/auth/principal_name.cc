#include "auth/principal_name.h"

#include <openssl/sha.h>

#include <limits>

#include "kerneld/status.h"

namespace kerneld::server {

Principal TokenPrincipal(std::string_view name) { return "token:" + std::string(name); }

Principal UidPrincipal(uid_t uid) { return "uid:" + std::to_string(uid); }

Principal ConnectionPrincipal(uint64_t serial) {
  return std::string(kConnectionPrefix) + std::to_string(serial);
}

Principal CertificatePrincipal(std::string_view name, bool from_san) {
  // An RFC 2253 subject starts with an attribute type and '=', never with
  // "san:", so the two certificate namespaces stay apart.
  const std::string prefix = from_san ? "x509:san:" : "x509:";
  std::string whole = Sanitize(name, std::numeric_limits<size_t>::max());
  if (whole.size() <= kMaxWholeCertificateName) return prefix + whole;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(name.data()), name.size(), digest);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  // Sanitize ends a cut name with "…", which no whole name holds.
  return prefix + Sanitize(name, 96) + " sha256:" + hex;
}

}  // namespace kerneld::server
