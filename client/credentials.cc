#include "credentials.h"

#include <grpcpp/support/client_interceptor.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace kerneld::client {

namespace {

bool ReadFile(const std::string& flag, const std::string& path, std::string* out,
              std::string* error) {
  if (path.empty()) return true;
  std::ifstream f(path);
  if (!f) {
    *error = "cannot read " + flag + " " + path;
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// Adds the token to every call's metadata. An interceptor, not call
// credentials: gRPC sends call credentials only over TLS, and a token is
// also what a client on a plaintext unix socket or loopback port presents.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA))
      m->GetSendInitialMetadata()->insert({"authorization", *value_});
    m->Proceed();
  }

 private:
  const std::string* value_;  // owned by the factory, which the channel keeps
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : value_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&value_);
  }

 private:
  std::string value_;
};

ClientSecurity& Defaults() {
  static ClientSecurity* s = new ClientSecurity();
  return *s;
}

}  // namespace

void SetDefaultSecurity(const ClientSecurity& sec) { Defaults() = sec; }
const ClientSecurity& DefaultSecurity() { return Defaults(); }

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const grpc::ChannelArguments& args,
                                           const ClientSecurity& sec, std::string* error) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (sec.tls()) {
    if (sec.tls_cert.empty() != sec.tls_key.empty()) {
      *error = "--tls-cert and --tls-key go together (a client certificate and its key)";
      return nullptr;
    }
    grpc::SslCredentialsOptions o;
    if (!ReadFile("--tls-ca", sec.tls_ca, &o.pem_root_certs, error) ||
        !ReadFile("--tls-cert", sec.tls_cert, &o.pem_cert_chain, error) ||
        !ReadFile("--tls-key", sec.tls_key, &o.pem_private_key, error))
      return nullptr;
    creds = grpc::SslCredentials(o);
  }
  if (sec.token.empty()) return grpc::CreateCustomChannel(target, creds, args);
  if (sec.token.find_first_of("\r\n") != std::string::npos) {
    *error = "the token has a line break; pass it without one";
    return nullptr;
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> f;
  f.push_back(std::make_unique<TokenInterceptorFactory>(sec.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args, std::move(f));
}

std::string TlsConnectionHint(const grpc::Status& st, const ClientSecurity& sec) {
  if (st.error_code() != grpc::StatusCode::UNAVAILABLE || !sec.tls()) return "";
  if (sec.tls_cert.empty())
    return "if the daemon requires client certificates (kerneld --tls_client_ca), pass "
           "--tls-cert and --tls-key";
  return "if the daemon requires client certificates (kerneld --tls_client_ca), check that "
         "--tls-cert is signed by a CA it trusts there";
}

}  // namespace kerneld::client
