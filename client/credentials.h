// How a client proves who it is to kerneld (docs/security.md): TLS (a CA
// to verify the daemon; a certificate and key for mutual TLS) and a bearer
// token, sent as "authorization: Bearer TOKEN" on every call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace kerneld::client {

struct ClientSecurity {
  // PEM files. Any of them set: the channel uses TLS; an empty tls_ca then
  // verifies the daemon against the system's roots.
  std::string tls_ca, tls_cert, tls_key;
  std::string token;  // bearer token; "" sends none
  bool tls() const { return !tls_ca.empty() || !tls_cert.empty() || !tls_key.empty(); }
};

// A channel to `target` with `sec` applied. On an unreadable or half-given
// file, *error says which (the channel is then null).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const grpc::ChannelArguments& args,
                                           const ClientSecurity& sec, std::string* error);

// kernelctl's flags --tls-ca/--tls-cert/--tls-key/--token, then
// $KERNELD_TOKEN, become the security every channel kernelctl opens uses
// (perf and replay open channels of their own).
void SetDefaultSecurity(const ClientSecurity& sec);
const ClientSecurity& DefaultSecurity();

// A line for kernelctl to print after a failed call: what to check when a
// TLS connection could not be made (a daemon that requires client
// certificates closes the connection, and gRPC reports only "Socket
// closed"); "" when there is nothing to add.
std::string TlsConnectionHint(const grpc::Status& st, const ClientSecurity& sec);

}  // namespace kerneld::client
