// Loopback round-trip latency of a tiny request (16-element float32 scale)
// through a real in-process kerneld server: unary Execute, and ping-pong on
// one ExecuteStream; the kernel's own time on the CPU as the reference.
//
//   build/bench/service_latency_bench [requests] [backend]   (default 5000, auto)
//
// On a GPU machine it also times a local launch + synchronize of the same
// kernel (no server): the floor the service's overhead is measured against.
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench_util.h"
#include "client.h"
#include "daemon.h"
#include "kerneld/call.h"
#include "tensor_util.h"

#ifdef KERNELD_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace kerneld;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  const std::string backend = argc > 2 ? argv[2] : "";
  server::Config cfg;
  cfg.listen = "127.0.0.1:0";
  cfg.metrics_listen = "off";
  server::Daemon daemon(cfg);
  if (std::string err = daemon.Start(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  client::KernelClient c(daemon.bound_addresses().at(0));
  std::mt19937_64 rng(1);
  v1::ExecuteRequest req;
  req.set_op("scale");
  client::ToProto(client::Random(DType::kFloat32, {16}, rng), &(*req.mutable_inputs())["x"]);
  (*req.mutable_attrs())["factor"].set_f(2.0);
  req.set_backend(backend);

  std::vector<double> unary, stream, exec;
  v1::ExecuteResponse resp;
  for (int i = 0; i < 200; ++i) c.Execute(req, &resp);  // warm-up
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!c.Execute(req, &resp).ok()) return 1;
    unary.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    exec.push_back(static_cast<double>(resp.info().execute_ns()) / 1e3);
  }
  auto s = c.OpenStream();
  for (int i = 0; i < n + 200; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!s->Send(req) || !s->Receive(&resp)) return 1;
    if (i >= 200)
      stream.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  s->CloseSend();
  s->Finish();
  std::vector<double> local;
#ifdef KERNELD_WITH_CUDA
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) {
    const OpDef* op = OpRegistry::Global().Find("scale");
    KernelContext ctx;
    ctx.op = op;
    ctx.attrs = {{"factor", 2.0}};
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    ctx.stream = st;
    ctx.device.device = Device::Cuda(0);
    ctx.device.sm_count = 132;
    TensorView x;
    x.dtype = DType::kFloat32;
    x.shape = {16};
    x.device = ctx.device.device;
    cudaMalloc(&x.data, 64);
    TensorView y = x;
    cudaMalloc(&y.data, 64);
    ctx.inputs = {x};
    ctx.outputs = {y};
    const ImplDef& impl = *op->FindImpl("cuda");
    for (int i = 0; i < n + 200; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      (void)Call(impl, ctx);  // the library's call path (kerneld/call.h)
      cudaStreamSynchronize(st);
      if (i >= 200)
        local.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
#endif
  std::printf("%-34s %9s %9s   (backend %s, served on %s)\n", "16-element f32 scale, loopback", "p50 us", "p99 us",
              backend.empty() ? "auto" : backend.c_str(), resp.info().backend().c_str());
  std::printf("%-34s %9.1f %9.1f\n", "unary Execute", bench::Percentile(unary, 0.5), bench::Percentile(unary, 0.99));
  std::printf("%-34s %9.1f %9.1f\n", "ExecuteStream (ping-pong)", bench::Percentile(stream, 0.5), bench::Percentile(stream, 0.99));
  std::printf("%-34s %9.1f %9.1f\n", "kernel execute (server-side)", bench::Percentile(exec, 0.5), bench::Percentile(exec, 0.99));
  if (!local.empty())
    std::printf("%-34s %9.1f %9.1f\n", "local launch + sync (no server)", bench::Percentile(local, 0.5),
                bench::Percentile(local, 0.99));
  daemon.Shutdown();
  daemon.Wait();
  return 0;
}
