// Turns a call into an Identity: bearer token, else client certificate
// (mutual TLS), else the unix-socket peer's uid, else anonymous (only when
// no --auth_tokens file is configured): with --anonymous_buffers=connection
// the principal of the plaintext TCP connection the call came on
// ("conn:SERIAL"), else the one "anonymous". Principals are namespaced by
// their source (auth/principal_name.h). docs/security.md has the rules.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "auth/identity.h"
#include "auth/peer_listener.h"
#include "auth/rate_limiter.h"
#include "auth/token_file.h"
#include "config.h"
#include "kerneld/status.h"

namespace kerneld::server {

class Authenticator {
 public:
  // `peers` (may be null): the connections kerneld accepted itself (unix
  // sockets with their peers' credentials, plaintext TCP).
  Authenticator(const Config& cfg, const PeerTable* peers);

  // Loads --auth_tokens (if any); a message for the user on failure.
  std::string Init();
  // SIGHUP: re-reads --auth_tokens. On a mistake the old table stays and
  // the message says why; "" on success.
  std::string Reload();

  // OK with *out filled, or UNAUTHENTICATED with what to do about it.
  Status Identify(const grpc::ServerContextBase& ctx, Identity* out) const;
  // Identify, then --rate_limit: what every call passes once, before its
  // message is parsed. RESOURCE_EXHAUSTED when the principal is over its rate.
  Status Admit(const grpc::ServerContextBase& ctx, Identity* out) const;

  // A connection kerneld holds without gRPC (the same-host lane,
  // server/lane/): the unix-socket peer's credentials and the bearer token
  // it sent ("": none), under Identify's rules: a token names the
  // principal, else the peer's uid does.
  Status IdentifyPeer(const PeerCred& peer, std::string_view token, Identity* out) const;
  // IdentifyPeer, then --rate_limit, as Admit.
  Status AdmitPeer(const PeerCred& peer, std::string_view token, Identity* out) const;

  // PERMISSION_DENIED unless `id` has the admin role; `what` names the act.
  static Status RequireAdmin(const Identity& id, const std::string& what);

  bool tokens_enabled() const { return !cfg_.auth_tokens.empty(); }
  size_t token_count() const;

 private:
  Quota DefaultQuota() const;
  void FillFromToken(const TokenEntry& e, Identity* out) const;

  const Config& cfg_;
  const PeerTable* peers_;
  const bool check_certs_;
  const bool per_connection_;  // --anonymous_buffers=connection
  const uid_t daemon_uid_;
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> tokens_;  // swapped whole on reload
  mutable RateLimiter rate_;
};

// The authenticator the service handlers consult; null: everyone anonymous
// (unit tests that run handlers without a daemon).
void SetCallAuthenticator(const Authenticator* a);
const Authenticator* CallAuthenticator();

// Identify() through CallAuthenticator(); anonymous when none is set.
Status IdentifyCall(const grpc::ServerContextBase& ctx, Identity* out);
// Admit() the same way.
Status AdmitCall(const grpc::ServerContextBase& ctx, Identity* out);

}  // namespace kerneld::server
