// Request graphs through the service (docs/graphs.md, "Measuring"): what one
// ExecuteGraph call costs against the same kernels called one by one, and
// against the echo floor of the same bytes. bench/graph_bench.sh runs it
// beside graph_bench_local (the same kernels in one process) and prints
// the table of both.
//
//   - The MLP block of a Llama-3-8B decoder layer at decode (bfloat16,
//     hidden 4096, intermediate 14336; T tokens per call):
//     fused_add_rmsnorm -> gemm (gate_up) -> silu_and_mul -> gemm (down),
//     the weights in device buffers kerneld allocated (AllocateBuffer), x and
//     the residual inline. Per T: four separate Execute calls (which also
//     warm the kernels' modules), then the graph's first call (its capture
//     on a GPU), then the p50 and p99 of the graph (replayed) and of the
//     four calls, the outputs compared bit for bit, and with --floor the
//     echo floor's p50 for a request of the same inline bytes.
//   - A chain of --chain_steps scale steps on --chain_elems float32 at
//     --clients clients (each its own connection): one graph call each time
//     against the same steps as separate Execute calls, in kernels per
//     second; and the chain's first call against its replayed p50.
//
// Each result is also printed as a line "RESULT <key> <value>" for the
// script's table.
//
//   graph_service_bench --target ADDR [--floor ADDR] [--device cuda:0]
//                       [--tokens 1,16,64] [--hidden 4096] [--intermediate 14336]
//                       [--iters 200] [--clients 8] [--seconds 2]
//                       [--chain_steps 16] [--chain_elems 4096]
//
// On a CPU daemon (--device cpu) the weights live in registered shared
// memory instead (AllocateBuffer is GPU memory); give its unix socket as
// --target so that the registration is allowed. Exit status: 0, 1 when a
// call failed or the graph and the separate calls differ, 2 on bad flags.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_client.h"
#include "bench_util.h"
#include "buffers.h"
#include "cli_flags.h"
#include "client.h"
#include "graph_builder.h"

namespace kerneld::bench {
namespace {

namespace v1 = ::kerneld::v1;
using client::GraphBuilder;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target, floor, device = "cuda:0";
  std::vector<int64_t> tokens;
  int64_t hidden = 4096, intermediate = 14336;
  int iters = 200, clients = 8, chain_steps = 16;
  double seconds = 2;
  int64_t chain_elems = 4096;
};

void Result(const std::string& key, double value) {
  std::printf("RESULT %s %.6g\n", key.c_str(), value);
}

// Runs f() `iters` times; its latencies in microseconds.
template <typename F>
std::vector<double> Latencies(int iters, F&& f) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    f();
    us.push_back(UsSince(t0));
  }
  return us;
}

// Uniform values in [-1, 1) of `dt` (float32, or bfloat16 rounded to
// nearest even) as an inline wire tensor.
v1::Tensor RandomTensor(v1::DType dt, const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  v1::Tensor t;
  t.set_dtype(dt);
  int64_t n = 1;
  for (int64_t d : shape) {
    t.add_shape(d);
    n *= d;
  }
  std::string bytes = RandomFloats(n, rng, -1, 1);
  if (dt == v1::DTYPE_BFLOAT16) {
    // In place, front to back: element i's two bytes land below the four
    // it was read from, on bytes already read.
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, bytes.data() + i * 4, 4);
      const uint16_t h = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
      std::memcpy(bytes.data() + i * 2, &h, 2);
    }
    bytes.resize(static_cast<size_t>(n) * 2);
  }
  t.set_inline_data(std::move(bytes));
  return t;
}

// Device memory for the weights: AllocateBuffer on a GPU, registered shared
// memory on the CPU.
class Weights {
 public:
  Weights(client::KernelClient& c, const std::string& device, int64_t bytes) : c_(c) {
    if (device.rfind("cuda", 0) == 0) {
      auto stub = v1::BufferService::NewStub(c.channel());
      grpc::ClientContext ctx;
      v1::AllocateBufferRequest req;
      req.set_device(device);
      req.set_byte_size(static_cast<uint64_t>(bytes));
      req.set_name("graph_service_bench weights");
      v1::AllocateBufferResponse resp;
      if (grpc::Status st = stub->AllocateBuffer(&ctx, req, &resp); !st.ok())
        Fail("AllocateBuffer", st);
      id_ = resp.buffer_id();
    } else {
      shm_ = std::make_unique<client::SharedMemoryBuffer>(c, static_cast<uint64_t>(bytes));
      if (!shm_->status().ok()) Fail("RegisterSharedMemory", shm_->status());
      id_ = shm_->id();
    }
  }
  ~Weights() {
    if (!shm_) (void)client::UnregisterBuffer(c_, id_);
  }
  const std::string& id() const { return id_; }

 private:
  client::KernelClient& c_;
  std::string id_;
  std::unique_ptr<client::SharedMemoryBuffer> shm_;
};

// Writes random bfloat16 values times `scale` into rows x cols at `offset`
// of buffer `id`: one-step graphs whose output goes into the buffer.
void Fill(client::KernelClient& c, const std::string& device, const std::string& id,
          uint64_t offset, int64_t rows, int64_t cols, double scale, std::mt19937_64& rng) {
  const int64_t per_call = std::max<int64_t>(1, (int64_t{8} << 20) / (cols * 2));
  for (int64_t r0 = 0; r0 < rows; r0 += per_call) {
    const int64_t n = std::min(per_call, rows - r0);
    GraphBuilder g;
    g.SetDevice(device);
    auto x = g.Input("x", RandomTensor(v1::DTYPE_BFLOAT16, {n, cols}, rng));
    g.Output("w", g.Step("scale", {{"x", x}}, {{"factor", scale}}), id,
             offset + static_cast<uint64_t>(r0 * cols * 2));
    v1::ExecuteGraphResponse resp;
    if (grpc::Status st = client::RunGraph(c, g.request(), &resp); !st.ok())
      Fail("filling the weights", st);
  }
}

v1::Tensor Ref(const std::string& id, uint64_t offset, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(v1::DTYPE_BFLOAT16);
  for (int64_t d : shape) t.add_shape(d);
  t.mutable_buffer()->set_buffer_id(id);
  t.mutable_buffer()->set_offset(offset);
  return t;
}

v1::ExecuteResponse Call(client::KernelClient& c, const std::string& device, const std::string& op,
                         const std::map<std::string, v1::Tensor>& in,
                         const std::map<std::string, v1::AttrValue>& attrs = {}) {
  v1::ExecuteRequest req;
  req.set_op(op);
  req.set_device(device);
  for (const auto& [k, v] : in) (*req.mutable_inputs())[k] = v;
  for (const auto& [k, v] : attrs) (*req.mutable_attrs())[k] = v;
  v1::ExecuteResponse resp;
  if (grpc::Status st = c.Execute(req, &resp); !st.ok()) Fail(op, st);
  return resp;
}

v1::AttrValue F(double f) {
  v1::AttrValue a;
  a.set_f(f);
  return a;
}
v1::AttrValue B(bool b) {
  v1::AttrValue a;
  a.set_b(b);
  return a;
}

bool SameBytes(const v1::Tensor& a, const v1::Tensor& b) {
  return a.dtype() == b.dtype() && a.inline_data() == b.inline_data() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

int RunMlp(const Options& o, client::KernelClient& c) {
  const int64_t H = o.hidden, I = o.intermediate;
  // One buffer: the norm's weight, gate_up [2I, H], down [H, I].
  const uint64_t norm_at = 0, gu_at = 256, down_at = gu_at + static_cast<uint64_t>(2 * I * H * 2);
  Weights w(c, o.device, static_cast<int64_t>(down_at) + H * I * 2);
  std::mt19937_64 rng(1);
  Fill(c, o.device, w.id(), norm_at, 1, H, 1.0, rng);
  Fill(c, o.device, w.id(), gu_at, 2 * I, H, 1.0 / std::sqrt(static_cast<double>(H)), rng);
  Fill(c, o.device, w.id(), down_at, H, I, 1.0 / std::sqrt(static_cast<double>(I)), rng);
  const v1::Tensor w_norm = Ref(w.id(), norm_at, {H}), w_gu = Ref(w.id(), gu_at, {2 * I, H}),
                   w_down = Ref(w.id(), down_at, {H, I});

  std::unique_ptr<client::KernelClient> floor;
  if (!o.floor.empty()) floor = Connect(o.floor, 0);
  int rc = 0;
  std::printf("\nMLP block through kerneld, bfloat16, hidden %lld, intermediate %lld, %s (us)\n",
              static_cast<long long>(H), static_cast<long long>(I), o.device.c_str());
  std::printf("%-4s %12s %12s %12s %12s %12s %12s %6s\n", "T", "graph p50", "graph p99",
              "4 calls p50", "4 calls p99", "first graph", "echo p50", "same");
  for (int64_t T : o.tokens) {
    const v1::Tensor x = RandomTensor(v1::DTYPE_BFLOAT16, {T, H}, rng),
                     r = RandomTensor(v1::DTYPE_BFLOAT16, {T, H}, rng);
    auto four_calls = [&] {
      v1::ExecuteResponse n =
          Call(c, o.device, "fused_add_rmsnorm", {{"x", x}, {"residual", r}, {"weight", w_norm}},
               {{"eps", F(1e-5)}});
      v1::ExecuteResponse gu = Call(c, o.device, "gemm", {{"a", n.outputs().at("x")}, {"b", w_gu}},
                                    {{"transpose_b", B(true)}});
      v1::ExecuteResponse act = Call(c, o.device, "silu_and_mul", {{"x", gu.outputs().at("c")}});
      v1::ExecuteResponse y =
          Call(c, o.device, "gemm", {{"a", act.outputs().at("y")}, {"b", w_down}},
               {{"transpose_b", B(true)}});
      return std::make_pair(y.outputs().at("c"), n.outputs().at("residual"));
    };
    GraphBuilder g;
    g.SetDevice(o.device);
    auto gx = g.Input("x", x), gr = g.Input("residual", r);
    auto gn = g.Input("w_norm", v1::DTYPE_BFLOAT16, {H}, w.id(), norm_at);
    auto ggu = g.Input("w_gate_up", v1::DTYPE_BFLOAT16, {2 * I, H}, w.id(), gu_at);
    auto gd = g.Input("w_down", v1::DTYPE_BFLOAT16, {H, I}, w.id(), down_at);
    auto norm = g.Step("fused_add_rmsnorm", {{"x", gx}, {"residual", gr}, {"weight", gn}},
                       {{"eps", 1e-5}}, "norm");
    auto gu = g.Step("gemm", {{"a", norm}, {"b", ggu}}, {{"transpose_b", true}});
    auto act = g.Step("silu_and_mul", {{"x", gu}});
    g.Output("y", g.Step("gemm", {{"a", act}, {"b", gd}}, {{"transpose_b", true}}));
    g.Output("residual", GraphBuilder::Out(norm, "residual"));
    v1::ExecuteGraphResponse resp;
    auto graph_call = [&] {
      if (grpc::Status st = client::RunGraph(c, g.request(), &resp); !st.ok())
        Fail("MLP graph", st);
    };

    // The separate calls first: they load every kernel's module, so the
    // graph's first call below costs its capture, not the daemon's first
    // use of the kernels.
    const auto want = four_calls();
    four_calls();
    const auto t0 = Clock::now();
    graph_call();
    const double first = UsSince(t0);
    const bool same = SameBytes(resp.outputs().at("y"), want.first) &&
                      SameBytes(resp.outputs().at("residual"), want.second);
    if (!same) rc = 1;
    for (int i = 0; i < 10; ++i) graph_call();
    const Latency gl = Summarize(Latencies(o.iters, graph_call));
    const Latency cl = Summarize(Latencies(o.iters, four_calls));
    double echo = 0;
    if (floor) {
      // The same inline bytes in (x, residual) and out (the echo: y's and
      // the residual's size): the transport's own cost for this request.
      v1::ExecuteRequest er;
      er.set_op("fused_add_rmsnorm");
      (*er.mutable_inputs())["x"] = x;
      (*er.mutable_inputs())["residual"] = r;
      v1::ExecuteResponse eresp;
      auto echo_call = [&] {
        if (grpc::Status st = floor->Execute(er, &eresp); !st.ok()) Fail("echo floor", st);
      };
      for (int i = 0; i < 10; ++i) echo_call();
      echo = Percentile(Latencies(o.iters, echo_call), 0.5);
    }
    std::printf("%-4lld %12.1f %12.1f %12.1f %12.1f %12.1f %12.1f %6s\n", static_cast<long long>(T),
                gl.p50, gl.p99, cl.p50, cl.p99, first, echo, same ? "yes" : "NO");
    const std::string t = "T" + std::to_string(T);
    Result("mlp_graph_p50_us_" + t, gl.p50);
    Result("mlp_graph_p99_us_" + t, gl.p99);
    Result("mlp_calls_p50_us_" + t, cl.p50);
    Result("mlp_calls_p99_us_" + t, cl.p99);
    Result("mlp_graph_first_us_" + t, first);
    if (floor) Result("mlp_echo_p50_us_" + t, echo);
    Result("mlp_same_" + t, same ? 1 : 0);
  }
  return rc;
}

// Runs body(client index, connection) on o.clients threads for o.seconds;
// the kernels they ran per second (body returns how many it ran).
template <typename Body>
double KernelsPerSecond(const Options& o, const std::string& target, Body&& body) {
  std::vector<std::unique_ptr<client::KernelClient>> conns;
  for (int i = 0; i < o.clients; ++i) conns.push_back(Connect(target, i + 1));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> kernels{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int i = 0; i < o.clients; ++i)
    threads.emplace_back([&, i] {
      body(*conns[static_cast<size_t>(i)]);  // warm: its connection and first call
      while (!stop.load(std::memory_order_relaxed))
        kernels.fetch_add(body(*conns[static_cast<size_t>(i)]), std::memory_order_relaxed);
    });
  // The measuring thread waits out the window; the clients run until told.
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop.store(true);
  for (auto& t : threads) t.join();
  return static_cast<double>(kernels.load()) /
         std::chrono::duration<double>(Clock::now() - t0).count();
}

int RunChain(const Options& o, client::KernelClient& c) {
  std::mt19937_64 rng(2);
  const v1::Tensor x = RandomTensor(v1::DTYPE_FLOAT32, {o.chain_elems}, rng);
  GraphBuilder g;
  g.SetDevice(o.device);
  auto cur = g.Input("x", x);
  for (int i = 0; i < o.chain_steps; ++i)
    cur = g.Step("scale", {{"x", cur}}, {{"factor", 1.0 + 0.001 * i}});
  auto graph_call = [&](client::KernelClient& k) {
    v1::ExecuteGraphResponse resp;
    if (grpc::Status st = client::RunGraph(k, g.request(), &resp); !st.ok())
      Fail("chain graph", st);
    return static_cast<int64_t>(o.chain_steps);
  };
  auto separate = [&](client::KernelClient& k) {
    v1::Tensor t = x;
    for (int i = 0; i < o.chain_steps; ++i)
      t = Call(k, o.device, "scale", {{"x", t}}, {{"factor", F(1.0 + 0.001 * i)}})
              .outputs()
              .at("y");
    return static_cast<int64_t>(o.chain_steps);
  };
  std::printf("\nchain of %d scale steps on %lld float32 through kerneld, %s\n", o.chain_steps,
              static_cast<long long>(o.chain_elems), o.device.c_str());
  separate(c);  // the kernel's module loaded: the graph's first call is its capture
  const auto t0 = Clock::now();
  graph_call(c);
  const double first = UsSince(t0);
  for (int i = 0; i < 10; ++i) graph_call(c);
  const double replayed = Percentile(Latencies(o.iters, [&] { graph_call(c); }), 0.5);
  std::printf("one client: first graph call %.1f us, later calls p50 %.1f us (%.2f x)\n", first,
              replayed, first / replayed);
  Result("chain_first_us", first);
  Result("chain_replayed_p50_us", replayed);
  const double graph_kps = KernelsPerSecond(o, o.target, graph_call);
  const double calls_kps = KernelsPerSecond(o, o.target, separate);
  std::printf(
      "%d clients: one graph call %.0f kernels/s (%.0f graphs/s); %d separate calls "
      "%.0f kernels/s; %.2f x\n",
      o.clients, graph_kps, graph_kps / o.chain_steps, o.chain_steps, calls_kps,
      graph_kps / calls_kps);
  Result("chain_graph_kernels_per_s", graph_kps);
  Result("chain_calls_kernels_per_s", calls_kps);
  if (!o.floor.empty()) {
    // The transport's own ceiling: the echo floor answering the chain's
    // request bytes (x in, y out) at the same clients. No graph call can
    // come back faster, so chain_steps x this rate bounds kernels/s.
    v1::ExecuteRequest er;
    er.set_op("scale");
    (*er.mutable_inputs())["x"] = x;
    const double echo_rps = KernelsPerSecond(o, o.floor, [&](client::KernelClient& k) {
      v1::ExecuteResponse r;
      if (grpc::Status st = k.Execute(er, &r); !st.ok()) Fail("echo floor", st);
      return int64_t{1};
    });
    std::printf(
        "%d clients: the echo floor answers %.0f requests/s: at most %.0f kernels/s "
        "for %d-step graphs through any gRPC server\n",
        o.clients, echo_rps, echo_rps * o.chain_steps, o.chain_steps);
    Result("chain_echo_requests_per_s", echo_rps);
  }
  return 0;
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"graph_service_bench: request graphs through kerneld (see the file's header)",
               "graph_service_bench"};
  // A repeated flag takes its last value: a script's override after its defaults.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--target", o.target, "the daemon: HOST:PORT or unix:/path")
      ->type_name("ADDR")
      ->required();
  app.add_option("--floor", o.floor, "the echo floor, measured beside it")->type_name("ADDR");
  app.add_option("--device", o.device, "where the kernels run (cpu: weights in shared memory)")
      ->capture_default_str();
  std::string tokens = "1,16,64";
  app.add_option("--tokens", tokens, "the MLP block's tokens per call, one row each")
      ->check(client::PositiveList(true))
      ->capture_default_str();
  app.add_option("--hidden", o.hidden, "the MLP block's hidden size")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--intermediate", o.intermediate, "the MLP block's intermediate size")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--iters", o.iters, "calls per latency figure")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--clients", o.clients, "the chain's clients, each its own connection")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--seconds", o.seconds, "each throughput window")
      ->check(client::NumberAtLeast(0, false))
      ->capture_default_str();
  app.add_option("--chain_steps", o.chain_steps, "scale steps in the chain")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--chain_elems", o.chain_elems, "float32 elements the chain scales")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  if (std::optional<int> rc = ParseFlags(app, argc, argv)) return *rc;
  o.tokens.clear();  // checked above: positive integers, comma-separated
  std::stringstream list(tokens);
  for (std::string item; std::getline(list, item, ',');) o.tokens.push_back(std::stoll(item));
  client::KernelClient c(o.target);
  const int mlp = RunMlp(o, c);
  const int chain = RunChain(o, c);
  return mlp != 0 || chain != 0 ? 1 : 0;
}

}  // namespace
}  // namespace kerneld::bench

int main(int argc, char** argv) { return kerneld::bench::Main(argc, argv); }
