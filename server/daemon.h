// The kerneld daemon: gRPC server (KernelService, health, reflection),
// metrics exposer, devices; start-up and graceful drain.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "auth/authenticator.h"
#include "auth/peer_listener.h"
#include "config.h"
#include "devices/device_manager.h"
#include "jit/jit_backend.h"
#include "kserve/kserve_handlers.h"
#include "lane/lane_server.h"
#include "sandbox/user_kernel_setup.h"
#include "metrics/metrics.h"
#include "service/buffer_service.h"
#include "service/health_service.h"
#include "service/kernel_service.h"
#include "service/request_runner.h"
#include "graph/graph_runner.h"
#include "service/stream_registry.h"
#include "service/tuning_service.h"

namespace kerneld::server {

class Daemon {
 public:
  explicit Daemon(Config cfg);
  ~Daemon();

  // Binds every address and starts serving; "" or a message for the user.
  std::string Start();
  // Stops accepting (health NOT_SERVING; new requests and streams are
  // answered UNAVAILABLE; open streams end UNAVAILABLE once their answers
  // are written), waits for the requests in flight (up to the drain
  // timeout), then shuts gRPC down and stops the metrics exposer. Every
  // call ends OK or UNAVAILABLE. Safe to call from a signal thread.
  void Shutdown();
  // How often the drain looks at the runner's in-flight count.
  static constexpr std::chrono::milliseconds kDrainPoll{1};
  // Once nothing runs: time for the last answers to leave gRPC's buffers
  // before the connections are shut down.
  static constexpr std::chrono::milliseconds kAnswerFlush{50};
  // gRPC's own shutdown, once the connections are gone: it closes them and
  // cancels whatever is left at this deadline.
  static constexpr std::chrono::milliseconds kShutdownGrace{1000};
  // At destruction, after gRPC's shutdown: the most the last streams' OnDone
  // (run on gRPC's threads) are waited for before the registry goes.
  static constexpr std::chrono::milliseconds kStreamsGone{2000};
  void Wait();

  const std::vector<std::string>& bound_addresses() const { return bound_; }
  const std::vector<std::string>& tls_addresses() const { return tls_bound_; }
  // SIGHUP: re-reads --auth_tokens; "" or why the old tokens stay.
  std::string ReloadTokens();
  int metrics_port() const { return metrics_->port(); }

 private:
  Config cfg_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<DeviceManager> devices_;
  std::unique_ptr<jit::JitBackend> jit_;  // the nvrtc impls' engine; after the workers stop
  // User kernels and kerneld.v1.AdminService (sandbox/user_kernel_setup.h):
  // their ops outlive every request, so they go after the server.
  std::unique_ptr<sandbox::UserKernelServices> user_kernels_;
  std::unique_ptr<BufferRegistry> buffers_;
  std::unique_ptr<RequestLog> log_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<BufferHandlers> buffer_handlers_;
  std::unique_ptr<grpc::Service> buffer_service_;  // on the API --grpc_api names
  std::unique_ptr<grpc::Service> jit_service_;     // kerneld.v1.JitService, likewise
  // kerneld.v1.TuningService (Tune, `kernelctl tune`), on the same API.
  std::unique_ptr<TuneHandler> tune_handler_;
  std::unique_ptr<grpc::Service> tuning_service_;
  // --grpc_api=sync: the health service is kerneld's own (a callback one in
  // a sync server costs every request; service/health_service.h).
  std::unique_ptr<SyncHealthService> sync_health_;
  // The health service the daemon reports to: gRPC's default or sync_health_.
  grpc::HealthCheckServiceInterface* health() const;
  // Open ExecuteStreams: their limits and the drain's list (before server_:
  // the server's shutdown ends the streams that reference it).
  std::unique_ptr<StreamRegistry> streams_;
  std::unique_ptr<RequestRunner> runner_;
  std::unique_ptr<GraphRunner> graphs_;  // ExecuteGraph (graph/graph_runner.h)
  // inference.GRPCInferenceService (KServe v2, kserve/), on the same port;
  // after runner_ and buffer_handlers_, whose requests and regions it uses.
  std::unique_ptr<kserve::KServeHandlers> kserve_handlers_;
  std::unique_ptr<grpc::Service> kserve_service_;  // on the API --grpc_api names
  std::unique_ptr<grpc::Service> service_;  // KernelServiceImpl, or the sync one (--grpc_api)
  std::unique_ptr<grpc::Server> server_;
  // --lane_socket (docs/lane.md): after runner_, so that it goes first.
  std::unique_ptr<LaneServer> lanes_;
  std::vector<std::string> bound_, tls_bound_;
  // The connections kerneld accepts itself (auth/peer_listener.h); shared
  // with the buffer registry, which asks whether a connection still lives.
  std::shared_ptr<PeerTable> peers_;
  std::unique_ptr<Authenticator> auth_;
  // Plaintext listeners kerneld accepts on: unix sockets, and TCP under
  // --anonymous_buffers=connection.
  std::vector<std::unique_ptr<PeerListener>> peer_listeners_;
  void StopPeerListeners();
  // Publishes per-device health ("kerneld.device/cuda:0") to the health
  // service, so a GPU lost to a sticky error shows without a request.
  void HealthLoop();
  std::thread health_thread_;
  std::mutex health_mu_;
  std::condition_variable health_cv_;
  bool stopping_ = false;
};

}  // namespace kerneld::server
