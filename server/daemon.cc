#include "daemon.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "auth/principal_name.h"
#include "auth/tls.h"
#include "jit/jit_setup.h"
#include "kserve/kserve_service.h"
#include "metrics/daemon_log.h"
#include "scheduler/tuning_metrics.h"
#include "scheduler/tuning_setup.h"
#include "service/jit_service.h"
#include "service/sync_service.h"

namespace kerneld::server {

namespace {

// Requests the GPUs run at once: their streams, summed.
int GpuStreams(const DeviceManager& devices) {
  int n = 0;
  for (const auto& w : devices.workers())
    if (w->info().device.is_cuda()) n += w->threads();
  return n;
}

// gRPC only logs a failed bind; probing first lets us say why and exit with
// a message a person can act on. Only for explicit IPv4 TCP ports.
std::string ProbeTcp(const std::string& addr) {
  if (addr.rfind("unix:", 0) == 0) return "";
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  int p = std::atoi(port.c_str());
  if (p == 0) return "";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(p));
  if (host == "localhost") host = "127.0.0.1";
  if (host == "0.0.0.0" || host == "*" || host.empty())
    sa.sin_addr.s_addr = INADDR_ANY;
  else if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1)
    return "";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as gRPC does; not REUSEPORT
  std::string err;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) err = std::strerror(errno);
  close(fd);
  return err;
}

// Shuts down, both ways, every stream socket of this process whose local
// address is a gRPC address of the daemon: its listeners and the
// connections they accepted. A client's call then fails UNAVAILABLE at the
// transport instead of reaching gRPC's shutdown, which answers a call
// arriving once it began with CANCELLED; data already written still goes
// out before the FIN. gRPC owns these sockets: it sees them fail and closes
// them itself.
void ShutdownServingSockets(const std::vector<int>& tcp_ports,
                            const std::vector<std::string>& unix_paths) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  std::vector<int> fds;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (*end == '\0' && end != e->d_name && fd != dirfd(dir)) fds.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  // Listeners first, so that no client reconnects meanwhile.
  for (int pass = 0; pass < 2; ++pass) {
    for (int fd : fds) {
      int type = 0, listening = 0;
      socklen_t len = sizeof type;
      if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
      len = sizeof listening;
      if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) continue;
      if ((listening != 0) != (pass == 0)) continue;
      sockaddr_storage ss{};
      len = sizeof ss;
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
      bool ours = false;
      if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
        const int port =
            ntohs(ss.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(&ss)->sin_port
                                          : reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
        ours = std::find(tcp_ports.begin(), tcp_ports.end(), port) != tcp_ports.end();
      } else if (ss.ss_family == AF_UNIX && len > offsetof(sockaddr_un, sun_path)) {
        const auto* un = reinterpret_cast<const sockaddr_un*>(&ss);
        const std::string path(un->sun_path,
                               strnlen(un->sun_path, len - offsetof(sockaddr_un, sun_path)));
        ours = !path.empty() &&
               std::find(unix_paths.begin(), unix_paths.end(), path) != unix_paths.end();
      }
      if (ours) shutdown(fd, SHUT_RDWR);
    }
  }
}

}  // namespace

Daemon::Daemon(Config cfg) : cfg_(std::move(cfg)) {}

Daemon::~Daemon() {
  if (lanes_) lanes_->Stop();
  StopPeerListeners();
  if (peers_) peers_->StopSweeper();  // before the buffers it releases go
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    stopping_ = true;
  }
  health_cv_.notify_all();
  if (health_thread_.joinable()) health_thread_.join();
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  // Shutdown cancelled every call; a stream leaves the registry on a gRPC
  // or worker thread once its status is issued (ExecuteStreamReactor::
  // EndStream). Wait (bounded; it returns at once when none is left) for the
  // last Close before the registry goes: its lock orders that Close before
  // the destructor for ThreadSanitizer, which cannot see gRPC's own
  // (uninstrumented) locks.
  if (streams_) (void)streams_->WaitAllClosed(std::chrono::steady_clock::now() + kStreamsGone);
  if (metrics_) metrics_->SetSources(nullptr, nullptr);  // before devices and buffers go
  if (devices_) devices_->StopAll();
  if (auth_ && CallAuthenticator() == auth_.get()) SetCallAuthenticator(nullptr);
  if (streams_ && CurrentStreamRegistry() == streams_.get()) SetStreamRegistry(nullptr);
  if (graphs_ && CurrentGraphRunner() == graphs_.get()) SetGraphRunner(nullptr);
}

void Daemon::StopPeerListeners() {
  for (auto& l : peer_listeners_) l->Stop();
}

std::string Daemon::ReloadTokens() {
  if (!auth_ || !auth_->tokens_enabled()) return "no --auth_tokens file to re-read";
  return auth_->Reload();
}

std::string Daemon::Start() {
  peers_ = std::make_shared<PeerTable>();
  // kerneld accepts on unix sockets (their peers' uids) and, unless
  // --anonymous_buffers=shared, on plaintext TCP (each connection without a
  // token a principal of its own); gRPC serves the rest (TLS) itself, and
  // calls there skip the lookup.
  const bool per_connection = cfg_.anonymous_buffers != "shared";
  auto accepts_itself = [per_connection](const std::string& a) {
    return PeerListener::ServesUnix(a) || (per_connection && PeerListener::ServesTcp(a));
  };
  bool any_peers = accepts_itself(cfg_.listen);
  for (const auto& a : cfg_.extra_listen) any_peers = any_peers || accepts_itself(a);
  auth_ = std::make_unique<Authenticator>(cfg_, any_peers ? peers_.get() : nullptr);
  if (std::string err = auth_->Init(); !err.empty()) return err;
  SetCallAuthenticator(auth_.get());
  metrics_ = std::make_unique<Metrics>();
  if (!cfg_.metrics_listen.empty() && cfg_.metrics_listen != "off") {
    if (std::string err = metrics_->Listen(cfg_.metrics_listen); !err.empty()) return err;
  }
  devices_ = std::make_unique<DeviceManager>(cfg_);
  std::string jit_error;
  jit_ = StartJit(cfg_, *devices_, &jit_error);  // the nvrtc backend (docs/jit.md)
  if (!jit_error.empty()) return jit_error;
  buffers_ = std::make_unique<BufferRegistry>();
  if (per_connection && any_peers) {
    // An anonymous connection's buffers go with it: when its descriptor is
    // accepted again or the sweeper finds it closed (auth/peer_listener.h),
    // and a registration finishing after that is refused.
    peers_->OnGone(
        [b = buffers_.get()](uint64_t serial) { b->ReleaseOwner(ConnectionPrincipal(serial)); });
    buffers_->SetOwnerAlive([p = peers_](const Principal& who) {
      uint64_t serial = 0;
      return absl::SimpleAtoi(absl::string_view(who).substr(kConnectionPrefix.size()), &serial) &&
             p->Alive(serial);
    });
    peers_->StartSweeper(std::chrono::seconds(1));
  }
  log_ = std::make_unique<RequestLog>(cfg_.log_level, cfg_.log_format == "json", cfg_.log_file);
  if (!log_->ok()) return "cannot open --log_file " + cfg_.log_file;
  if (!cfg_.trace_file.empty()) {
    trace_ = std::make_unique<TraceWriter>(cfg_.trace_file, cfg_.trace_sample_rate);
    if (!trace_->ok()) return trace_->error();
  }
  streams_ = std::make_unique<StreamRegistry>(
      StreamRegistry::Limits{cfg_.max_streams, cfg_.quota_streams});
  SetStreamRegistry(streams_.get());
  runner_ = std::make_unique<RequestRunner>(cfg_, *devices_, *metrics_, buffers_.get(), log_.get(),
                                            trace_.get());
  if (std::string err = LoadTuning(cfg_, *devices_, &runner_->scheduler().tuning()); !err.empty())
    return err;
  PublishTuningTable(&runner_->scheduler().tuning());  // kerneld_tuning_*
  graphs_ = std::make_unique<GraphRunner>(cfg_, runner_->devices(), runner_->scheduler(), *metrics_,
                                          buffers_.get());
  SetGraphRunner(graphs_.get());
  buffer_handlers_ = std::make_unique<BufferHandlers>(cfg_, *devices_, *buffers_);
  metrics_->SetSources(devices_.get(), buffers_.get());
  // --grpc_api=sync serves every service on the sync API: one callback
  // method in the server would add gRPC's callback pollers to every call
  // (service/health_service.h).
  const bool sync_api = cfg_.grpc_api == "sync";
  tune_handler_ = std::make_unique<TuneHandler>(cfg_, *devices_, runner_->scheduler().tuning());
  if (sync_api)
    tuning_service_ = std::make_unique<TuningServiceSyncImpl>(*tune_handler_);
  else
    tuning_service_ = std::make_unique<TuningServiceImpl>(*tune_handler_);
  if (sync_api) {
    service_ = std::make_unique<KernelServiceSyncImpl>(cfg_, *runner_);
    buffer_service_ = std::make_unique<BufferServiceSyncImpl>(*buffer_handlers_);
    jit_service_ = std::make_unique<JitServiceSyncImpl>(*jit_);
    sync_health_ = std::make_unique<SyncHealthService>();
  } else {
    service_ = std::make_unique<KernelServiceImpl>(cfg_, *runner_);
    buffer_service_ = std::make_unique<BufferServiceImpl>(*buffer_handlers_);
    jit_service_ = std::make_unique<JitServiceImpl>(*jit_);
  }
  user_kernels_ = sandbox::StartUserKernels(cfg_, *devices_, sync_api);  // docs/user-kernels.md
  kserve_handlers_ = std::make_unique<kserve::KServeHandlers>(cfg_, *runner_, *metrics_,
                                                              *buffer_handlers_, *buffers_);
  if (sync_api)
    kserve_service_ = std::make_unique<kserve::KServeServiceSyncImpl>(*kserve_handlers_);
  else
    kserve_service_ = std::make_unique<kserve::KServeServiceImpl>(*kserve_handlers_);

  grpc::EnableDefaultHealthCheckService(!sync_api);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Two daemons must never share a port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Calls one connection may have open at once (HTTP/2 SETTINGS); the
  // daemon-wide and per-principal stream limits are the StreamRegistry's.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, cfg_.max_streams_per_connection);
  const int max_bytes = cfg_.max_message_mb * 1024 * 1024;
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  std::vector<std::string> addrs = {cfg_.listen};
  addrs.insert(addrs.end(), cfg_.extra_listen.begin(), cfg_.extra_listen.end());
  const size_t n_plain = addrs.size();
  addrs.insert(addrs.end(), cfg_.tls_listen.begin(), cfg_.tls_listen.end());
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (!cfg_.tls_listen.empty()) {
    if (std::string err = MakeTlsCredentials(cfg_, &tls); !err.empty()) return err;
  }
  std::vector<int> ports(addrs.size(), 0);
  // addrs[i]'s listener in peer_listeners_, or -1 where gRPC listens.
  std::vector<int> own(addrs.size(), -1);
  for (size_t i = 0; i < addrs.size(); ++i) {
    const bool is_tls = i >= n_plain;
    const bool unix_socket = PeerListener::ServesUnix(addrs[i]);
    if (!is_tls && accepts_itself(addrs[i])) {
      // Accepted by kerneld itself (auth/peer_listener.h), served by gRPC.
      auto l = std::make_unique<PeerListener>(addrs[i], peers_.get());
      if (std::string err = l->Bind(); !err.empty())
        return "cannot listen on " + addrs[i] + ": " + err +
               (unix_socket ? "" : " (is another kerneld running? pick another --listen)");
      own[i] = static_cast<int>(peer_listeners_.size());
      peer_listeners_.push_back(std::move(l));
    } else if (std::string err = ProbeTcp(addrs[i]); !err.empty()) {
      return "cannot listen on " + addrs[i] + ": " + err +
             " (is another kerneld running? pick another --listen)";
    }
    if (!is_tls && !IsLocalAddress(addrs[i]))  // only with --allow_insecure_remote (ParseFlags)
      DaemonLog(LogLevel::kWarning, "insecure_listen",
                "WARNING: --listen=" + addrs[i] +
                    " serves plaintext beyond this machine (--allow_insecure_remote): tokens and "
                    "tensors cross the network unencrypted; prefer --tls_listen",
                {{"address", addrs[i]}});
    if (own[i] < 0)
      builder.AddListeningPort(addrs[i], is_tls ? tls : grpc::InsecureServerCredentials(),
                               &ports[i]);
  }
  if (sync_api && cfg_.grpc_sync_pollers > 0) {
    builder.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, cfg_.grpc_sync_pollers);
  } else if (const int gpu_streams = GpuStreams(*devices_); sync_api && gpu_streams > 0) {
    // gRPC's sync API ends a thread that finishes a call while MAX_POLLERS
    // (default 2) others poll, and starts another when too few do: under
    // load it churns threads, and each new one that runs a GPU request
    // inline builds its CUDA state and the impls' warm-up (cuBLASLt's
    // handle: ~0.1 s). As many pollers as the GPUs have streams keep those
    // threads (H100 host, --cuda_streams=32, 32 unary clients: p99 17x the
    // floor's with gRPC's default, 0.56x with this). Without a GPU there
    // is no such state, and more pollers only wake each other (2-core
    // machine: 30x the context switches at 32 unary clients), so gRPC's
    // default stays.
    builder.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, std::max(2, gpu_streams));
  }
  builder.RegisterService(service_.get());
  builder.RegisterService(buffer_service_.get());
  builder.RegisterService(jit_service_.get());
  builder.RegisterService(tuning_service_.get());
  builder.RegisterService(user_kernels_->service.get());
  builder.RegisterService(kserve_service_.get());
  if (sync_health_) builder.RegisterService(sync_health_.get());
  server_ = builder.BuildAndStart();
  if (!server_)
    return "cannot start the gRPC server on " + cfg_.listen +
           (cfg_.tls_listen.empty()
                ? std::string(" (address in use or invalid)")
                : " (address in use or invalid, or --tls_cert / --tls_key do not match)");
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (own[i] >= 0) {
      bound_.push_back(peer_listeners_[static_cast<size_t>(own[i])]->bound_address());
      continue;
    }
    if (ports[i] == 0) return "cannot listen on " + addrs[i];
    (i < n_plain ? bound_ : tls_bound_)
        .push_back(addrs[i].substr(0, addrs[i].rfind(':')) + ":" + std::to_string(ports[i]));
  }
  for (auto& l : peer_listeners_) l->Start(server_.get());
  if (!cfg_.lane_socket.empty()) {  // the same-host lane (docs/lane.md)
    for (const auto& a : bound_)    // binding would replace gRPC's socket file
      if (a == "unix:" + cfg_.lane_socket)
        return "--lane_socket=" + cfg_.lane_socket +
               " is a --listen socket too; give the lane a path of its own";
    lanes_ = std::make_unique<LaneServer>(cfg_, *runner_, auth_.get());
    if (std::string err = lanes_->Bind(); !err.empty())
      return "cannot listen on --lane_socket=" + cfg_.lane_socket + ": " + err;
    lanes_->Start();
  }
  health()->SetServingStatus(true);
  health()->SetServingStatus("kerneld.v1.KernelService", true);
  health()->SetServingStatus("inference.GRPCInferenceService", true);
  health_thread_ = std::thread([this] { HealthLoop(); });

  if (!cfg_.ready_file.empty()) {
    std::string tmp = cfg_.ready_file + ".tmp";
    {
      std::ofstream f(tmp);
      for (const auto& a : bound_) f << "grpc " << a << "\n";
      for (const auto& a : tls_bound_) f << "grpc_tls " << a << "\n";
      f << "metrics " << metrics_->port() << "\n";
      if (lanes_) f << "lane unix:" << lanes_->path() << "\n";
    }
    std::rename(tmp.c_str(), cfg_.ready_file.c_str());
  }
  return "";
}

grpc::HealthCheckServiceInterface* Daemon::health() const {
  if (sync_health_) return sync_health_.get();
  return server_->GetHealthCheckService();
}

void Daemon::HealthLoop() {
  std::unique_lock<std::mutex> lock(health_mu_);
  while (!stopping_) {
    for (const auto& w : devices_->workers())
      health()->SetServingStatus("kerneld.device/" + w->info().device.ToString(), w->healthy());
    health_cv_.wait_for(lock, std::chrono::milliseconds(500));
  }
}

void Daemon::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    stopping_ = true;  // the device health loop must not flip statuses back
  }
  health_cv_.notify_all();
  if (!server_) return;
  health()->SetServingStatus(false);
  if (sync_health_) sync_health_->Shutdown();  // ends its Watch streams
  // Stop accepting work: new requests and streams are answered UNAVAILABLE
  // by the handlers, and every open ExecuteStream ends UNAVAILABLE once the
  // answers it owes are written (an idle one at once).
  runner_->BeginDrain();
  if (lanes_) lanes_->BeginDrain();  // no new lanes; open ones answer UNAVAILABLE
  graphs_->BeginDrain();
  streams_->BeginDrain();
  DaemonLog(LogLevel::kInfo, "drain_started",
            "drain started: health NOT_SERVING; new requests and streams are answered "
            "UNAVAILABLE",
            {{"inflight", static_cast<double>(runner_->inflight())},
             {"streams", static_cast<double>(streams_->open())}});
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(cfg_.drain_timeout_s * 1000));
  // Exit follows the last in-flight request, not the last client: a client
  // that keeps calling is answered UNAVAILABLE meanwhile and does not hold
  // the drain. Streams signal their end; the runner's count is polled.
  bool drained = streams_->WaitAllClosed(deadline);
  while (drained && runner_->inflight() + graphs_->inflight() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      drained = false;
      break;
    }
    std::this_thread::sleep_for(kDrainPoll);
  }
  if (!drained)
    DaemonLog(LogLevel::kWarning, "drain_timeout",
              "drain timeout: cancelling " + std::to_string(runner_->inflight()) +
                  " requests and " + std::to_string(streams_->open()) + " streams",
              {{"inflight", static_cast<double>(runner_->inflight())},
               {"streams", static_cast<double>(streams_->open())}});
  // The lanes' threads end; nothing of theirs runs any more.
  if (lanes_) lanes_->Stop();
  StopPeerListeners();  // no new connection may reach a server shutting down
  // gRPC's Shutdown kills every call that arrives once it began (clients
  // read CANCELLED), and a client that keeps calling is always about to
  // send one. So the connections go first, at the socket: the last answers
  // are given kAnswerFlush to leave gRPC's buffers, then every connection
  // is shut down (a call in transit fails UNAVAILABLE), and gRPC's
  // Shutdown finds nothing left to cancel.
  if (drained) std::this_thread::sleep_for(kAnswerFlush);
  std::vector<int> tcp_ports;
  for (const auto* list : {&bound_, &tls_bound_})
    for (const auto& a : *list)
      if (a.rfind("unix:", 0) != 0)
        tcp_ports.push_back(std::atoi(a.substr(a.rfind(':') + 1).c_str()));
  std::vector<std::string> unix_paths;
  for (const auto& a : bound_)
    if (a.rfind("unix:", 0) == 0) unix_paths.push_back(a.substr(5));
  ShutdownServingSockets(tcp_ports, unix_paths);
  server_->Shutdown(std::chrono::system_clock::now() +
                    (drained ? kShutdownGrace : std::chrono::milliseconds(0)));
  // Not left to the destructor: civetweb's stop otherwise delays exit by up
  // to 2 s (see Metrics::Stop).
  metrics_->Stop();
}

void Daemon::Wait() {
  if (server_) server_->Wait();
  if (devices_) devices_->StopAll();
  // Every run is recorded once the workers are stopped.
  if (runner_ && devices_) SaveTuning(cfg_, *devices_, runner_->scheduler().tuning());
  PublishTuningTable(nullptr);
}

}  // namespace kerneld::server
