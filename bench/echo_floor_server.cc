// kerneld_echo_floor: the floor kerneld's service path is measured against.
// It serves the kerneld.v1.KernelService proto itself, so kernelctl (and any
// kerneld client) talks to it unchanged, but Execute only echoes: outputs
// are the inputs (scale's y is x's bytes) and ExecutionInfo stays zero. What
// kerneld costs above this on the same transport, message size and machine
// is kerneld's own overhead. --kernel (CUDA builds) also runs the scale
// kernel on the data and synchronizes: the floor for a GPU request.
// --work_ns N spins N ns in every Execute and stream message before it
// answers: a floor that does as much CPU work per request as kerneld's
// server total, to tell the cost of that work on a small machine (where the
// client shares the cores) from kerneld's own overhead
// (bench/host_ab.sh work, docs/performance.md).
//
//   kerneld_echo_floor --listen 127.0.0.1:0 --listen unix:/tmp/floor.sock
//                      [--mode sync|callback] [--threads N] [--kernel]
//                      [--work_ns N] [--ready_file FILE]
//
// The ready file gets one "grpc ADDRESS" line per listener (the bound port
// for ":0"), as kerneld writes it. SIGTERM or SIGINT stops the server.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "echo_floor_kernel.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::bench {
namespace {

namespace v1 = ::kerneld::v1;

bool g_kernel = false;
int64_t g_work_ns = 0;

// Busy, not asleep: the point is CPU time on the handler's thread.
void Work() {
  if (g_work_ns <= 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(g_work_ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// The response kerneld would send for this request, with no work done
// (or only the kernel, with --kernel). Fails only when the kernel does.
grpc::Status Echo(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp) {
  Work();
  resp->set_request_id(req.request_id());
  const bool scale = req.op() == "scale";
  for (const auto& [name, t] : req.inputs())
    (*resp->mutable_outputs())[scale && name == "x" ? "y" : name] = t;
  resp->mutable_info();  // present, all zeros
  if (g_kernel && scale && req.inputs().count("x") && req.inputs().at("x").has_buffer()) {
    // `kernelctl perf --via ipc`: x (and y) in buffers registered here.
    const v1::Tensor& x = req.inputs().at("x");
    auto yo = req.outputs().find("y");
    const v1::Tensor& y = yo != req.outputs().end() && yo->second.has_buffer() ? yo->second : x;
    int64_t n = 1;
    for (int64_t d : x.shape()) n *= d;
    auto f = req.attrs().find("factor");
    const float factor = f == req.attrs().end() ? 1.0f : static_cast<float>(f->second.f());
    if (std::string err = FloorKernelScaleBuffers(x.buffer().buffer_id(), x.buffer().offset(),
                                                  y.buffer().buffer_id(), y.buffer().offset(), n,
                                                  x.dtype(), factor);
        !err.empty())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, err);
    (*resp->mutable_outputs())["y"] = y;
  } else if (g_kernel && scale) {
    auto it = resp->mutable_outputs()->find("y");
    auto f = req.attrs().find("factor");
    if (it != resp->mutable_outputs()->end() && it->second.has_inline_data()) {
      const float factor = f == req.attrs().end() ? 1.0f : static_cast<float>(f->second.f());
      if (!FloorKernelScale(it->second.mutable_inline_data(),
                            it->second.dtype() == v1::DTYPE_FLOAT32, factor))
        return grpc::Status(grpc::StatusCode::INTERNAL, "kernel failed");
    }
  }
  return grpc::Status::OK;
}

// The sync API: gRPC's own thread pool runs the handlers.
class SyncEcho final : public v1::KernelService::Service {
  grpc::Status Execute(grpc::ServerContext*, const v1::ExecuteRequest* req,
                       v1::ExecuteResponse* resp) override {
    return Echo(*req, resp);
  }

  grpc::Status ExecuteStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ExecuteResponse, v1::ExecuteRequest>* stream) override {
    v1::ExecuteRequest req;
    v1::ExecuteResponse resp;
    while (stream->Read(&req)) {
      resp.Clear();
      const grpc::Status st = Echo(req, &resp);
      resp.mutable_status()->set_code(st.error_code());
      if (!stream->Write(resp)) break;
    }
    return grpc::Status::OK;
  }
};

// Registration of CUDA IPC buffers (--kernel), so the floor's kernel runs on
// the client's own memory, as kerneld's does. Not timed: sync is enough.
class FloorBuffers final : public v1::BufferService::Service {
  grpc::Status RegisterCudaIpcBuffer(grpc::ServerContext*,
                                     const v1::RegisterCudaIpcBufferRequest* req,
                                     v1::RegisterCudaIpcBufferResponse* resp) override {
    if (!g_kernel)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "start the floor with --kernel to register CUDA IPC buffers");
    std::string id;
    if (std::string err = FloorOpenIpc(req->ipc_handle(), req->byte_size(), &id); !err.empty())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, err);
    resp->set_buffer_id(id);
    return grpc::Status::OK;
  }

  grpc::Status UnregisterBuffer(grpc::ServerContext*, const v1::UnregisterBufferRequest* req,
                                v1::UnregisterBufferResponse*) override {
    return FloorCloseIpc(req->buffer_id())
               ? grpc::Status::OK
               : grpc::Status(grpc::StatusCode::NOT_FOUND, "no buffer " + req->buffer_id());
  }
};

// The callback API, as kerneld uses it: a reactor per stream, answering
// each request before reading the next.
class StreamReactor final
    : public grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse> {
 public:
  StreamReactor() { StartRead(&req_); }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);
    resp_.Clear();
    const grpc::Status st = Echo(req_, &resp_);
    resp_.mutable_status()->set_code(st.error_code());
    StartWrite(&resp_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    StartRead(&req_);
  }

  void OnDone() override { delete this; }

 private:
  v1::ExecuteRequest req_;
  v1::ExecuteResponse resp_;
};

class CallbackEcho final : public v1::KernelService::CallbackService {
  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx, const v1::ExecuteRequest* req,
                                    v1::ExecuteResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(Echo(*req, resp));
    return reactor;
  }

  grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* ExecuteStream(
      grpc::CallbackServerContext*) override {
    return new StreamReactor;
  }
};

int Usage() {
  std::fprintf(
      stderr,
      "usage: kerneld_echo_floor --listen ADDR [--listen ADDR2] [--mode sync|callback]\n"
      "                          [--threads N] [--kernel] [--work_ns N] [--ready_file FILE]\n");
  return 2;
}

int Main(int argc, char** argv) {
  std::vector<std::string> listen;
  std::string mode = "sync", ready_file;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& name, std::string* out) {
      if (a == name && i + 1 < argc) return *out = argv[++i], true;
      if (a.rfind(name + "=", 0) == 0) return *out = a.substr(name.size() + 1), true;
      return false;
    };
    std::string v;
    if (value("--listen", &v)) {
      listen.push_back(v);
    } else if (value("--mode", &mode) || value("--ready_file", &ready_file)) {
    } else if (value("--threads", &v)) {
      threads = std::atoi(v.c_str());
    } else if (value("--work_ns", &v)) {
      char* end = nullptr;
      errno = 0;
      g_work_ns = std::strtoll(v.c_str(), &end, 10);
      // At most 1000 s: steady_clock::now() + the spin must not overflow.
      if (v.empty() || *end != '\0' || errno == ERANGE || g_work_ns < 0 ||
          g_work_ns > int64_t{1000} * 1000 * 1000 * 1000)
        return Usage();
    } else if (a == "--kernel") {
      g_kernel = true;
    } else {
      return Usage();
    }
  }
  if (listen.empty() || (mode != "sync" && mode != "callback")) return Usage();
  if (g_kernel) {
    if (std::string err = FloorKernelInit(); !err.empty())
      return std::fprintf(stderr, "kerneld_echo_floor: %s\n", err.c_str()), 1;
  }
  // SIGTERM / SIGINT are taken by sigwait below, not by a handler.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  SyncEcho sync_service;
  CallbackEcho callback_service;
  FloorBuffers buffers;
  grpc::ServerBuilder b;
  b.SetMaxReceiveMessageSize(256 << 20);
  b.SetMaxSendMessageSize(256 << 20);
  if (mode == "sync") {
    b.RegisterService(&sync_service);
    if (threads > 0) {
      b.SetSyncServerOption(grpc::ServerBuilder::NUM_CQS, 1);
      b.SetSyncServerOption(grpc::ServerBuilder::MIN_POLLERS, 1);
      b.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, threads);
    }
  } else {
    b.RegisterService(&callback_service);
  }
  b.RegisterService(&buffers);
  std::vector<int> ports(listen.size());
  for (size_t i = 0; i < listen.size(); ++i)
    b.AddListeningPort(listen[i], grpc::InsecureServerCredentials(), &ports[i]);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr) return std::fprintf(stderr, "kerneld_echo_floor: cannot listen\n"), 1;
  std::string ready;
  for (size_t i = 0; i < listen.size(); ++i) {
    std::string addr = listen[i];
    if (addr.rfind("unix:", 0) != 0)
      addr = addr.substr(0, addr.rfind(':') + 1) + std::to_string(ports[i]);
    ready += "grpc " + addr + "\n";
  }
  std::fprintf(stderr, "kerneld_echo_floor: %s mode%s, serving\n%s", mode.c_str(),
               g_kernel ? " with the scale kernel" : "", ready.c_str());
  if (!ready_file.empty()) {
    // Written whole under another name, then renamed: a reader never sees half.
    const std::string tmp = ready_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fputs(ready.c_str(), f);
      std::fclose(f);
      std::rename(tmp.c_str(), ready_file.c_str());
    }
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

}  // namespace
}  // namespace kerneld::bench

int main(int argc, char** argv) { return kerneld::bench::Main(argc, argv); }
