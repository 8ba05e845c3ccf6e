#include "auth/authenticator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "auth/principal_name.h"
#include "auth/principal_stats.h"

namespace kerneld::server {

namespace {

std::atomic<const Authenticator*> g_authenticator{nullptr};

// The principal of the connection's verified client certificate: its
// subject, or its first SAN when the subject is empty (principal_name.h);
// "" when there is none.
std::string CertificateName(const grpc::ServerContextBase& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  for (const char* prop : {GRPC_X509_SUBJECT_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(prop))
      if (v.size() > 0)
        return CertificatePrincipal(std::string_view(v.data(), v.size()),
                                    prop == std::string_view(GRPC_X509_SAN_PROPERTY_NAME));
  }
  return "";
}

}  // namespace

void SetCallAuthenticator(const Authenticator* a) { g_authenticator.store(a); }
const Authenticator* CallAuthenticator() { return g_authenticator.load(); }

Status IdentifyCall(const grpc::ServerContextBase& ctx, Identity* out) {
  const Authenticator* a = CallAuthenticator();
  if (a == nullptr) {
    *out = Identity{};
    return Status::Ok();
  }
  return a->Identify(ctx, out);
}

Status AdmitCall(const grpc::ServerContextBase& ctx, Identity* out) {
  const Authenticator* a = CallAuthenticator();
  if (a == nullptr) {
    *out = Identity{};
    return Status::Ok();
  }
  return a->Admit(ctx, out);
}

Authenticator::Authenticator(const Config& cfg, const PeerTable* peers)
    : cfg_(cfg),
      peers_(peers),
      check_certs_(!cfg.tls_client_ca.empty()),
      per_connection_(cfg.anonymous_buffers != "shared"),
      daemon_uid_(geteuid()),
      rate_(cfg.rate_limit) {}

Status Authenticator::Admit(const grpc::ServerContextBase& ctx, Identity* out) const {
  KERNELD_RETURN_IF_ERROR(Identify(ctx, out));
  // Anonymous connections share one bucket: more connections, no more rate.
  return rate_.Admit(std::string(QuotaPrincipal(out->principal)));
}

std::string Authenticator::Init() {
  if (cfg_.auth_tokens.empty()) return "";
  if (std::string err = Reload(); !err.empty()) return err;
  // The file holds secrets: say so when others may read it.
  struct stat st {};
  if (stat(cfg_.auth_tokens.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    std::fprintf(
        stderr,
        "kerneld: WARNING: --auth_tokens %s is readable by its group or others (mode %04o); "
        "chmod 600 it\n",
        cfg_.auth_tokens.c_str(), static_cast<unsigned>(st.st_mode & 07777));
  return "";
}

std::string Authenticator::Reload() {
  if (cfg_.auth_tokens.empty()) return "";
  auto table = std::make_shared<TokenTable>();
  if (Status st = LoadTokenFile(cfg_.auth_tokens, table.get()); !st.ok()) return st.message();
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::move(table);
  return "";
}

size_t Authenticator::token_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_ ? tokens_->size() : 0;
}

Quota Authenticator::DefaultQuota() const {
  Quota q;
  q.max_bytes = cfg_.quota_bytes;
  q.max_buffers = cfg_.quota_buffers;
  q.max_inflight = cfg_.quota_inflight;
  return q;
}

void Authenticator::FillFromToken(const TokenEntry& e, Identity* out) const {
  out->principal = TokenPrincipal(e.principal);
  out->role = e.role;
  out->source = Identity::Source::kToken;
  if (e.uid) {  // the token's uid replaces the socket peer's, group included
    out->uid = *e.uid;
    out->gid.reset();
  }
  if (e.max_bytes) out->quota.max_bytes = *e.max_bytes;
  if (e.max_buffers) out->quota.max_buffers = *e.max_buffers;
  if (e.max_inflight) out->quota.max_inflight = *e.max_inflight;
}

Status Authenticator::Identify(const grpc::ServerContextBase& ctx, Identity* out) const {
  *out = Identity{};
  out->quota = DefaultQuota();
  // The unix-socket peer first: its uid bounds what is opened on its behalf
  // even when a token names the principal.
  std::optional<PeerCred> peer;
  std::optional<PeerConnection> conn;
  if (peers_ != nullptr) {
    conn = peers_->Find(ctx.peer());
    if (conn) peer = conn->cred;
    if (peer) {
      out->uid = peer->uid;
      out->gid = peer->gid;
    }
  }
  const auto& md = ctx.client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    const std::string_view value(it->second.data(), it->second.size());
    constexpr std::string_view kBearer = "bearer ";
    if (value.size() <= kBearer.size() ||
        !absl::EqualsIgnoreCase(absl::string_view(value.data(), kBearer.size()),
                                absl::string_view(kBearer.data(), kBearer.size()))) {
      PrincipalStats::Global().CountUnauthenticated();
      return {
          StatusCode::kUnauthenticated,
          "the authorization metadata is not \"Bearer TOKEN\"; send authorization: Bearer <token>"};
    }
    const absl::string_view rest(value.data() + kBearer.size(), value.size() - kBearer.size());
    const std::string token(absl::StripAsciiWhitespace(rest));
    std::shared_ptr<const TokenTable> table;
    {
      std::lock_guard<std::mutex> lock(mu_);
      table = tokens_;
    }
    if (table == nullptr) {
      PrincipalStats::Global().CountUnauthenticated();
      return {StatusCode::kUnauthenticated,
              "this kerneld has no --auth_tokens file, so it knows no bearer token; connect "
              "without one"};
    }
    auto e = table->find(token);
    if (e == table->end()) {
      PrincipalStats::Global().CountUnauthenticated();
      return {
          StatusCode::kUnauthenticated,
          "unknown bearer token (revoked, mistyped, or for another daemon); ask the operator for a "
          "token listed in kerneld's --auth_tokens file"};
    }
    FillFromToken(e->second, out);
    return Status::Ok();
  }
  if (check_certs_) {
    if (std::string name = CertificateName(ctx); !name.empty()) {
      out->principal = std::move(name);
      out->source = Identity::Source::kCertificate;
      return Status::Ok();
    }
  }
  if (peer) {
    out->principal = UidPrincipal(peer->uid);
    out->source = Identity::Source::kPeerUid;
    // The daemon's own user and root could read its memory anyway.
    out->role = (peer->uid == 0 || peer->uid == daemon_uid_) ? Role::kAdmin : Role::kUser;
    return Status::Ok();
  }
  if (tokens_enabled()) {
    PrincipalStats::Global().CountUnauthenticated();
    return {
        StatusCode::kUnauthenticated,
        "no credentials: this kerneld requires a bearer token (metadata authorization: Bearer "
        "TOKEN; "
        "kernelctl --token or $KERNELD_TOKEN), a client certificate, or a unix-socket connection"};
  }
  // Anonymous. On a connection kerneld accepted itself, the connection is
  // the principal (--anonymous_buffers=connection): what it registers is
  // its own, so local users without tokens are still kept apart.
  if (per_connection_ && peers_ != nullptr) {
    if (conn) {
      out->principal = ConnectionPrincipal(conn->serial);
    } else if (PeerTable::IsFdPeer(ctx.peer())) {
      // Not expected: a live call's descriptor stays recorded. Refused
      // rather than made the shared "anonymous".
      return {StatusCode::kUnavailable, "the connection closed; connect again"};
    }
  }
  return Status::Ok();
}

Status Authenticator::IdentifyPeer(const PeerCred& peer, std::string_view token,
                                   Identity* out) const {
  *out = Identity{};
  out->quota = DefaultQuota();
  out->uid = peer.uid;
  out->gid = peer.gid;
  if (!token.empty()) {
    std::shared_ptr<const TokenTable> table;
    {
      std::lock_guard<std::mutex> lock(mu_);
      table = tokens_;
    }
    auto e = table == nullptr ? TokenTable::const_iterator{} : table->find(std::string(token));
    if (table == nullptr || e == table->end()) {
      PrincipalStats::Global().CountUnauthenticated();
      return {StatusCode::kUnauthenticated,
              table == nullptr
                  ? "this kerneld has no --auth_tokens file, so it knows no bearer token; connect "
                    "without one"
                  : "unknown bearer token (revoked, mistyped, or for another daemon); ask the "
                    "operator for a token listed in kerneld's --auth_tokens file"};
    }
    FillFromToken(e->second, out);
    return Status::Ok();
  }
  out->principal = UidPrincipal(peer.uid);
  out->source = Identity::Source::kPeerUid;
  out->role = (peer.uid == 0 || peer.uid == daemon_uid_) ? Role::kAdmin : Role::kUser;
  return Status::Ok();
}

Status Authenticator::AdmitPeer(const PeerCred& peer, std::string_view token,
                                Identity* out) const {
  KERNELD_RETURN_IF_ERROR(IdentifyPeer(peer, token, out));
  return rate_.Admit(std::string(QuotaPrincipal(out->principal)));
}

Status Authenticator::RequireAdmin(const Identity& id, const std::string& what) {
  if (id.admin()) return Status::Ok();
  PrincipalStats::Global().CountPermissionDenied();
  return {StatusCode::kPermissionDenied,
          what + " needs the admin role; principal " + Quote(id.principal) +
              " is a user (the operator grants admin in the --auth_tokens file)"};
}

}  // namespace kerneld::server
