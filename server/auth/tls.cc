#include "auth/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kerneld::server {

namespace {

// gRPC only logs a bad PEM and then fails to start; reading and sniffing
// the files here lets the message name the flag.
std::string ReadPem(const std::string& flag, const std::string& path, const char* marker,
                    std::string* out) {
  std::ifstream f(path);
  if (!f) return "cannot read " + flag + "=" + path + ": " + std::strerror(errno);
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  if (out->find(marker) == std::string::npos)
    return flag + "=" + path + " holds no PEM \"" + marker + "\" block";
  return "";
}

}  // namespace

std::string MakeTlsCredentials(const Config& cfg, std::shared_ptr<grpc::ServerCredentials>* out) {
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  if (std::string e =
          ReadPem("--tls_cert", cfg.tls_cert, "-----BEGIN CERTIFICATE-----", &pair.cert_chain);
      !e.empty())
    return e;
  if (std::string e = ReadPem("--tls_key", cfg.tls_key, "PRIVATE KEY-----", &pair.private_key);
      !e.empty())
    return e;
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!cfg.tls_client_ca.empty()) {
    if (std::string e = ReadPem("--tls_client_ca", cfg.tls_client_ca, "-----BEGIN CERTIFICATE-----",
                                &opts.pem_root_certs);
        !e.empty())
      return e;
    opts.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  opts.pem_key_cert_pairs.push_back(std::move(pair));
  *out = grpc::SslServerCredentials(opts);
  return "";
}

}  // namespace kerneld::server
