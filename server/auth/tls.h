// Server credentials for --tls_listen: the certificate and key, and with
// --tls_client_ca a required, verified client certificate (mutual TLS).
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "config.h"

namespace kerneld::server {

// Reads the PEM files named by cfg; "" and *out set, or a message that
// names the flag and the file.
std::string MakeTlsCredentials(const Config& cfg, std::shared_ptr<grpc::ServerCredentials>* out);

}  // namespace kerneld::server
