#include "service/sync_service.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "auth/authenticator.h"
#include "graph/graph_runner.h"
#include "graph/graph_stream.h"
#include "service/execute_stream.h"
#include "service/kernel_service.h"
#include "service/library_log.h"
#include "service/stream_registry.h"
#include "service/sync_stream.h"

namespace kerneld::server {

namespace {

using DoneFn = std::function<void(const Status&)>;

// Calls start(done) and blocks until a worker calls done; returns its
// Status. std::mutex and condition_variable rather than absl::Notification:
// the worker's writes to the response must be ordered before the handler
// reads them in a way ThreadSanitizer sees (Debian's abseil is not
// instrumented). The notify happens under the lock, so the waiter cannot
// return and destroy these while the worker still touches them.
template <typename Start>
Status StartAndWait(Start&& start) {
  Status result;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  start(DoneFn([&](const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    result = st;
    done = true;
    cv.notify_one();
  }));
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return result;
}

// A sync ExecuteStream as the stream registry sees it: counted against
// --max_streams and --quota_streams like a callback one. Drain() cannot end
// the handler's blocking read; it makes the loop answer UNAVAILABLE after
// the message in hand (an idle stream ends when the drain closes the
// connections). Heap-allocated and counted: the registry's drain may hold it
// past the handler's return.
class SyncStreamEntry : public DrainableStream {
 public:
  void Drain() override {
    std::lock_guard<std::mutex> lock(mu_);
    draining_.store(true);
    if (stream_ != nullptr) stream_->Drain();
  }
  void Ref() override { refs_.fetch_add(1); }
  void Unref() override {
    if (refs_.fetch_sub(1) == 1) delete this;
  }
  bool draining() const { return draining_.load(); }
  // The pipelined ExecuteStream the drain reaches (sync_stream.h), while it
  // serves; null before it is destroyed. One attached after the drain
  // began is drained at once.
  void Attach(SyncExecuteStream* s) {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = s;
    if (s != nullptr && draining_.load()) s->Drain();
  }

 private:
  std::atomic<int> refs_{1};
  std::atomic<bool> draining_{false};
  std::mutex mu_;
  SyncExecuteStream* stream_ = nullptr;
};

// A sync stream's place in the stream registry for the handler's life: the
// caller identified once, a SyncStreamEntry opened for its quota principal
// (every anonymous connection together, or a caller would multiply its
// --quota_streams by opening connections) and closed when this goes. The
// ExecuteStream handler and ServeSyncStream both hold one, so the limits
// and the drain treat their streams alike. Without a registry (handlers
// run without a daemon in unit tests) nothing is counted.
class RegisteredStream {
 public:
  explicit RegisteredStream(const grpc::ServerContext& ctx) {
    Identity id;
    status_ = IdentifyCall(ctx, &id);
    if (!status_.ok()) return;
    registry_ = CurrentStreamRegistry();
    if (registry_ == nullptr) return;
    who_ = Principal(QuotaPrincipal(id.principal));
    auto* entry = new SyncStreamEntry;
    status_ = registry_->Open(entry, who_);
    if (!status_.ok()) {
      entry->Unref();
      return;
    }
    entry_ = entry;
  }
  ~RegisteredStream() {
    if (entry_ == nullptr) return;
    registry_->Close(entry_, who_);
    entry_->Unref();
  }
  RegisteredStream(const RegisteredStream&) = delete;
  RegisteredStream& operator=(const RegisteredStream&) = delete;

  // Why the stream may not open: authentication, a limit
  // (RESOURCE_EXHAUSTED) or the drain (UNAVAILABLE).
  const Status& status() const { return status_; }
  // The registry's entry; null without a registry or when refused.
  SyncStreamEntry* entry() const { return entry_; }

 private:
  Status status_;
  StreamRegistry* registry_ = nullptr;
  Principal who_;
  SyncStreamEntry* entry_ = nullptr;
};

// How a drained stream ends, after the answers already due.
constexpr char kDrainedStream[] =
    "kerneld is shutting down: this stream's answers are written and it takes no more messages; "
    "retry on another replica";

}  // namespace

std::function<bool()> CancelCheckAfter(std::chrono::nanoseconds wait, std::function<bool()> check) {
  return [wait, check = std::move(check), since = std::chrono::steady_clock::now()] {
    return std::chrono::steady_clock::now() - since >= wait && check();
  };
}

KernelServiceSyncImpl::KernelServiceSyncImpl(const Config& cfg, RequestRunner& runner)
    : cfg_(cfg), runner_(runner) {
  RouteLibraryLogs();
  const std::string svc = v1::KernelService::service_full_name();
  AddUnary(svc, "Execute",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return Execute(ctx, in, out);
           });
  AddBidi(svc, "ExecuteStream",
          [this](grpc::ServerContext* ctx,
                 grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return ExecuteStreamRaw(ctx, stream);
          });
  AddUnary(svc, "ListKernels",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return AnswerListKernels(*ctx, cfg_, runner_, in, out);
           });
  // graph/graph_runner.h: runs on this gRPC thread's behalf, waits here.
  AddUnary(svc, "ExecuteGraph",
           [](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             CallControl ctl = ControlFor(ctx);
             if (!ctl.refused.ok()) return ToGrpc(ctl.refused);
             GraphRunner* graphs = CurrentGraphRunner();
             if (graphs == nullptr)
               return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this server runs no graphs");
             v1::ExecuteGraphRequest req;
             if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
             ctl.cancelled = CancelCheckAfter(kSyncCancelCheckAfter, std::move(ctl.cancelled));
             v1::ExecuteGraphResponse resp;
             const Status result = StartAndWait(
                 [&](DoneFn done) { graphs->Start(req, &resp, std::move(ctl), std::move(done)); });
             if (!result.ok()) return ToGrpc(result);
             return SerializeRawMessage(resp, out);
           });
  AddUnary(svc, "GetServerInfo",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return AnswerServerInfo(*ctx, cfg_, runner_, in, out);
           });
}

grpc::Status KernelServiceSyncImpl::Execute(grpc::ServerContext* ctx, const grpc::ByteBuffer& in,
                                            grpc::ByteBuffer* out) {
  CallControl ctl = ControlFor(ctx);  // admitted before the message is parsed
  if (!ctl.refused.ok()) return ToGrpc(ctl.refused);
  v1::ExecuteRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  v1::ExecuteResponse resp;
  if (Status st = RunAndWait(runner_, std::move(ctl), req, &resp); !st.ok()) return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

grpc::Status KernelServiceSyncImpl::ExecuteStreamRaw(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  // Checked once up front, as the callback stream does; each message is
  // admitted again (ControlFor), so a revoked token stops later requests.
  const RegisteredStream registered(*ctx);
  if (!registered.status().ok()) return ToGrpc(registered.status());
  SyncStreamEntry* entry = registered.entry();
  SyncExecuteStream s(ctx, stream,
                      {cfg_.stream_window, static_cast<int64_t>(cfg_.stream_buffer_mb) << 20});
  if (entry != nullptr) entry->Attach(&s);
  struct Detach {  // before s goes: the drain must not reach it after
    SyncStreamEntry* entry;
    ~Detach() {
      if (entry != nullptr) entry->Attach(nullptr);
    }
  } detach{entry};
  return s.Serve(
      [this](const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
             DoneFn done) {
        if (req.has_graph())  // graph/graph_stream.h
          StartGraphMessage(req, resp, std::move(ctl), std::move(done));
        else
          runner_.Start(req, resp, std::move(ctl), std::move(done));
      },
      kDrainedStream);
}

Status RunAndWait(RequestRunner& runner, CallControl ctl, const v1::ExecuteRequest& req,
                  v1::ExecuteResponse* resp) {
  // On the sync API IsCancelled() polls the call's completion queue (30 us
  // a request on the 2-core machine, measured as the "launch" stage); only
  // a request that waited in a queue is worth asking about.
  ctl.cancelled = CancelCheckAfter(kSyncCancelCheckAfter, std::move(ctl.cancelled));
  return StartAndWait(
      [&](DoneFn done) { runner.Start(req, resp, std::move(ctl), std::move(done)); });
}

grpc::Status ServeSyncStream(grpc::ServerContext* ctx,
                             grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                             RequestRunner& runner, StreamCodec& codec) {
  const RegisteredStream registered(*ctx);
  if (!registered.status().ok()) return ToGrpc(registered.status());
  SyncStreamEntry* entry = registered.entry();
  grpc::ByteBuffer in, out;
  for (int64_t n = 1; stream->Read(&in); ++n) {
    const size_t bytes = in.Length();
    CallControl ctl = ControlFor(ctx);
    v1::ExecuteRequest req;
    v1::ExecuteResponse resp;
    std::unique_ptr<StreamCodec::State> state;
    Status refused;
    // A message whose caller is refused is not parsed: the runner answers
    // the refusal in its response's status.
    if (ctl.refused.ok() && !codec.Parse(&in, &req, &state, &refused))
      return codec.Malformed(n, bytes);
    if (refused.ok()) (void)RunAndWait(runner, std::move(ctl), req, &resp);
    codec.Serialize(refused, &resp, state.get(), &out);
    if (!stream->Write(out)) break;  // the client went away
    if (entry != nullptr && entry->draining())
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, kDrainedStream);
  }
  return grpc::Status::OK;
}

}  // namespace kerneld::server
