// User kernels against a GPU daemon (docs/user-kernels.md, "Measuring"; issue
// 30's Measure): bench/user_kernel_bench.sh starts kerneld with
// --allow_user_kernels and a fresh --jit_cache_dir and runs this.
//
//   1. Register to first result: a cold RegisterKernel of a user `scale`
//      (y = x * factor; the source carries a per-run comment, so no cache
//      holds it) plus its first Execute; then UnregisterKernel and a warm
//      re-register of the same source (the JIT cache's module) plus its
//      first Execute. Goals (H100): cold <= 2000 ms, warm register <= 20 ms.
//   2. Call overhead: Execute of the user scale and of the built-in `scale`
//      (--builtin_backend, default cuda) on the same input, --elems float32
//      in a buffer kerneld allocated (--via buffer, a BufferRef) or inline
//      (--via inline), interleaved (the order alternates each round), after
//      checking that both answer the same bytes. p50 and p99 of each and
//      the p50 ratio user / built-in. Goal: <= 1.3.
//   3. A fault's cost: a kernel that calls __trap(), --faults times: its
//      request fails (expected INTERNAL), then the user scale is called
//      until it succeeds: the sandbox's replacement time, from the fault's
//      answer to that success (goal <= 1000 ms, p50 and max reported).
//      Meanwhile another thread on its own connection calls the built-in
//      scale and rmsnorm in a loop: its calls and errors (goal 0), and its
//      p99 beside the same loop's before the faults (a quiet window of
//      --quiet_calls calls). Then the devices' health.
//
// Calls go to --target as one principal: the kernels are visible to their
// owner only (--user_kernel_visibility=own), and registering needs an admin,
// which on the daemon's unix socket is the daemon's own uid. Prints a table
// (and each figure as "RESULT key value" for scripts); --json FILE writes
// the figures as one JSON object.
//
//   user_kernel_bench --target unix:/path/kerneld.sock [--device cuda:0]
//                     [--elems 4096] [--iters 2000] [--faults 100]
//                     [--quiet_calls 2000] [--via buffer|inline]
//                     [--builtin_backend cuda] [--json FILE]
//
// Exit status: 0 measured (goals are judged in the table, not here); 1 a
// call failed, or the user and built-in scale differ, or the trap did not
// fail its request; 2 bad flags; 3 this daemon cannot run user kernels (no
// GPU, --allow_user_kernels off, or the caller is not an admin), said why.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
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
using Clock = std::chrono::steady_clock;

constexpr const char* kScaleName = "ukb_scale";
constexpr const char* kTrapName = "ukb_trap";
constexpr auto kCallTimeout = std::chrono::milliseconds(60000);

struct Options {
  std::string target, device = "cuda:0", via = "buffer", builtin_backend = "cuda", json;
  int64_t elems = 4096;
  int iters = 2000, faults = 100, quiet_calls = 2000;
};

[[noreturn]] void CannotMeasure(const std::string& why) {
  std::fprintf(stderr, "user_kernel_bench: cannot measure user kernels here: %s\n", why.c_str());
  std::exit(3);
}

// The figures, in the order measured: the RESULT lines and the JSON record.
std::vector<std::pair<std::string, double>> g_results;
void Result(const std::string& key, double value) {
  g_results.emplace_back(key, value);
  std::printf("RESULT %s %.6g\n", key.c_str(), value);
}

// The user kernels: the same signature (x, y, n, factor) as the spec below.
std::string Source(const std::string& entry, const std::string& body, const std::string& nonce) {
  return "// user_kernel_bench " + nonce + "\nextern \"C\" __global__ void " + entry +
         "(const float* __restrict__ x, float* __restrict__ y, long long n, float factor) {\n"
         "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n  " +
         body + "\n}\n";
}

v1::RegisterKernelRequest Spec(const std::string& name, const std::string& body,
                               const std::string& nonce) {
  v1::RegisterKernelRequest r;
  r.set_name(name);
  r.set_cuda_source(Source(name, body, nonce));
  r.set_entry(name);
  auto* x = r.add_inputs();
  x->set_name("x");
  x->add_dtypes(v1::DTYPE_FLOAT32);
  x->set_shape("[n]");
  auto* y = r.add_outputs();
  y->set_name("y");
  y->set_shape("same as 'x'");
  auto* f = r.add_attrs();
  f->set_name("factor");
  f->set_type("float");
  f->set_required(true);
  r.set_launch("grid = ceil(n / 256), block = 256");
  r.mutable_options()->set_replace(true);  // a rerun against the same daemon
  return r;
}

class Admin {
 public:
  explicit Admin(client::KernelClient& c) : stub_(v1::AdminService::NewStub(c.channel())) {}
  grpc::Status Register(const v1::RegisterKernelRequest& r, v1::RegisterKernelResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    return stub_->RegisterKernel(&ctx, r, resp);
  }
  grpc::Status Unregister(const std::string& name) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    v1::UnregisterKernelRequest req;
    req.set_name(name);
    v1::UnregisterKernelResponse resp;
    return stub_->UnregisterKernel(&ctx, req, &resp);
  }
  grpc::Status List(v1::ListUserKernelsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    return stub_->ListUserKernels(&ctx, v1::ListUserKernelsRequest(), resp);
  }

 private:
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

// A refusal of the first RegisterKernel that means this daemon cannot run
// user kernels for this caller, said in words; other failures are errors.
void CheckRegisterRefusal(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::FAILED_PRECONDITION:
      CannotMeasure("RegisterKernel refused (" + st.error_message() +
                    "): start kerneld with --allow_user_kernels");
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      CannotMeasure("RegisterKernel refused (" + st.error_message() +
                    "): call as an admin, e.g. on the daemon's unix socket as its own uid");
    case grpc::StatusCode::UNIMPLEMENTED:
      CannotMeasure("the daemon has no AdminService (" + st.error_message() + ")");
    default:
      Fail("RegisterKernel " + std::string(kScaleName), st);
  }
}

v1::Tensor InlineTensor(const std::vector<int64_t>& shape, const std::string& bytes) {
  v1::Tensor t;
  t.set_dtype(v1::DTYPE_FLOAT32);
  for (int64_t d : shape) t.add_shape(d);
  t.set_inline_data(bytes);
  return t;
}

// The call's input: --elems float32 in a buffer kerneld allocated on the
// device (written once with a one-step graph, the built-in scale by 1), or
// inline.
class Input {
 public:
  Input(client::KernelClient& c, const Options& o) : c_(c) {
    const std::string bytes = RandomFloats(o.elems, 7);
    if (o.via == "inline") {
      x_ = InlineTensor({o.elems}, bytes);
      return;
    }
    auto stub = v1::BufferService::NewStub(c.channel());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    v1::AllocateBufferRequest req;
    req.set_device(o.device);
    req.set_byte_size(static_cast<uint64_t>(o.elems) * 4);
    req.set_name("user_kernel_bench input");
    v1::AllocateBufferResponse resp;
    if (grpc::Status st = stub->AllocateBuffer(&ctx, req, &resp); !st.ok())
      Fail("AllocateBuffer (--via inline sends the input inline instead)", st);
    id_ = resp.buffer_id();
    client::GraphBuilder g;
    g.SetDevice(o.device);
    auto in = g.Input("x", InlineTensor({o.elems}, bytes));
    g.Output("y", g.Step("scale", {{"x", in}}, {{"factor", 1.0}}), id_, 0);
    v1::ExecuteGraphResponse gresp;
    if (grpc::Status st = client::RunGraph(c, g.request(), &gresp); !st.ok())
      Fail("writing the input buffer", st);
    x_.set_dtype(v1::DTYPE_FLOAT32);
    x_.add_shape(o.elems);
    x_.mutable_buffer()->set_buffer_id(id_);
    x_.mutable_buffer()->set_offset(0);
  }
  ~Input() {
    if (!id_.empty()) (void)client::UnregisterBuffer(c_, id_);
  }
  const v1::Tensor& x() const { return x_; }

 private:
  client::KernelClient& c_;
  std::string id_;
  v1::Tensor x_;
};

v1::ExecuteRequest ScaleCall(const std::string& op, const std::string& backend,
                             const std::string& device, const v1::Tensor& x) {
  v1::ExecuteRequest req;
  req.set_op(op);
  req.set_backend(backend);
  req.set_device(device);
  (*req.mutable_inputs())["x"] = x;
  (*req.mutable_attrs())["factor"].set_f(1.7);
  return req;
}

// Runs `req` once; its latency in microseconds. A failure ends the bench.
double TimedCall(client::KernelClient& c, const v1::ExecuteRequest& req, const char* what,
                 v1::ExecuteResponse* resp) {
  const auto t0 = Clock::now();
  grpc::Status st = c.Execute(req, resp, kCallTimeout);
  const double us = UsSince(t0);
  if (!st.ok()) Fail(what, st);
  return us;
}

// The built-in loop of part 3: scale and rmsnorm on the GPU, alternately,
// on a connection of its own, until `stop` or `max_calls`.
struct BuiltinLoop {
  std::vector<double> scale_us, rmsnorm_us;
  int64_t calls = 0, errors = 0;
  std::string first_error;
  std::atomic<bool> started{false};  // its first call answered

  void Run(client::KernelClient& c, const Options& o, const std::atomic<bool>& stop,
           int64_t max_calls) {
    const v1::ExecuteRequest scale = ScaleCall("scale", o.builtin_backend, o.device,
                                               InlineTensor({o.elems}, RandomFloats(o.elems, 11)));
    v1::ExecuteRequest norm;
    norm.set_op("rmsnorm");
    norm.set_backend(o.builtin_backend);
    norm.set_device(o.device);
    (*norm.mutable_inputs())["x"] = InlineTensor({16, 4096}, RandomFloats(16 * 4096, 12));
    (*norm.mutable_inputs())["weight"] = InlineTensor({4096}, RandomFloats(4096, 13));
    (*norm.mutable_attrs())["eps"].set_f(1e-5);
    for (int64_t i = 0; !stop.load(std::memory_order_relaxed) && (max_calls < 0 || i < max_calls);
         ++i) {
      const bool is_scale = i % 2 == 0;
      v1::ExecuteResponse resp;
      const auto t0 = Clock::now();
      grpc::Status st = c.Execute(is_scale ? scale : norm, &resp, kCallTimeout);
      const double us = UsSince(t0);
      ++calls;
      started.store(true);
      if (!st.ok()) {
        if (errors++ == 0)
          first_error = (is_scale ? "scale: " : "rmsnorm: ") + client::StatusName(st.error_code()) +
                        ": " + st.error_message();
        continue;
      }
      (is_scale ? scale_us : rmsnorm_us).push_back(us);
    }
  }
};

const char* YesNo(bool ok) { return ok ? "yes" : "NO"; }

int Run(const Options& o) {
  client::KernelClient c(o.target, client::ClientOptions(256, kCallTimeout));

  // A GPU, or nothing to measure: user kernels run in a sandbox on one.
  v1::GetServerInfoResponse info;
  if (grpc::Status st = c.GetServerInfo(&info); !st.ok()) Fail("GetServerInfo at " + o.target, st);
  std::string gpu, devices;
  for (const auto& d : info.devices()) {
    devices += (devices.empty() ? "" : ", ") + d.id();
    if (d.id() == o.device && d.kind() == "cuda") gpu = d.name();
  }
  if (gpu.empty())
    CannotMeasure("the daemon at " + o.target + " has no " + o.device + " (its devices: " +
                  devices + (info.cuda_status().empty() ? "" : "; " + info.cuda_status()) +
                  "): user kernels run in a sandbox on a GPU, so run this against a daemon on "
                  "a GPU host");

  Admin admin(c);
  // Per run: a cold compile even where an earlier run filled the JIT cache.
  const std::string nonce =
      std::to_string(getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  const v1::RegisterKernelRequest scale_spec =
      Spec(kScaleName, "if (i < n) y[i] = x[i] * factor;", nonce);
  const v1::RegisterKernelRequest trap_spec = Spec(kTrapName, "if (i == 0) __trap();", nonce);

  const Input input(c, o);
  const v1::ExecuteRequest user_call = ScaleCall(kScaleName, "", o.device, input.x());
  const v1::ExecuteRequest builtin_call =
      ScaleCall("scale", o.builtin_backend, o.device, input.x());
  std::printf("user kernels on %s (%s), %lld float32 %s, built-in scale on %s\n", o.device.c_str(),
              gpu.c_str(), static_cast<long long>(o.elems),
              o.via == "buffer" ? "in a server buffer (BufferRef)" : "inline",
              o.builtin_backend.empty() ? "the scheduler's choice" : o.builtin_backend.c_str());

  // 1. Register to first result: cold, then warm.
  v1::RegisterKernelResponse cold;
  auto t0 = Clock::now();
  if (grpc::Status st = admin.Register(scale_spec, &cold); !st.ok()) CheckRegisterRefusal(st);
  const double cold_reg_ms = MsSince(t0);
  v1::ExecuteResponse user_out, builtin_out;
  const double cold_first_ms =
      TimedCall(c, user_call, "the user scale's first call", &user_out) / 1000;
  if (grpc::Status st = admin.Unregister(kScaleName); !st.ok()) Fail("UnregisterKernel", st);
  v1::RegisterKernelResponse warm;
  t0 = Clock::now();
  if (grpc::Status st = admin.Register(scale_spec, &warm); !st.ok())
    Fail("the warm re-register", st);
  const double warm_reg_ms = MsSince(t0);
  const double warm_first_ms =
      TimedCall(c, user_call, "the user scale's first call after re-registering", &user_out) / 1000;
  Result("cold_register_ms", cold_reg_ms);
  Result("cold_compile_s", cold.compile_seconds());
  Result("cold_cache_hit", cold.cache_hit() ? 1 : 0);
  Result("cold_first_call_ms", cold_first_ms);
  Result("cold_total_ms", cold_reg_ms + cold_first_ms);
  Result("warm_register_ms", warm_reg_ms);
  Result("warm_cache_hit", warm.cache_hit() ? 1 : 0);
  Result("warm_first_call_ms", warm_first_ms);
  Result("warm_total_ms", warm_reg_ms + warm_first_ms);

  // 2. Call overhead, interleaved, after checking the answers agree.
  TimedCall(c, builtin_call, "the built-in scale", &builtin_out);
  const bool same =
      user_out.outputs().at("y").inline_data() == builtin_out.outputs().at("y").inline_data() &&
      !builtin_out.outputs().at("y").inline_data().empty();
  const std::string user_backend = user_out.info().backend(),
                    builtin_backend = builtin_out.info().backend();
  std::vector<double> user_us, builtin_us;
  user_us.reserve(static_cast<size_t>(o.iters));
  builtin_us.reserve(static_cast<size_t>(o.iters));
  for (int i = 0; i < 50; ++i) {  // warm: connection, allocator, both paths
    TimedCall(c, user_call, "the user scale", &user_out);
    TimedCall(c, builtin_call, "the built-in scale", &builtin_out);
  }
  for (int i = 0; i < o.iters; ++i) {
    if (i % 2 == 0) {
      user_us.push_back(TimedCall(c, user_call, "the user scale", &user_out));
      builtin_us.push_back(TimedCall(c, builtin_call, "the built-in scale", &builtin_out));
    } else {
      builtin_us.push_back(TimedCall(c, builtin_call, "the built-in scale", &builtin_out));
      user_us.push_back(TimedCall(c, user_call, "the user scale", &user_out));
    }
  }
  const Latency user_l = Summarize(user_us), builtin_l = Summarize(builtin_us);
  Result("same_bytes", same ? 1 : 0);
  Result("user_p50_us", user_l.p50);
  Result("user_p99_us", user_l.p99);
  Result("builtin_p50_us", builtin_l.p50);
  Result("builtin_p99_us", builtin_l.p99);
  Result("p50_ratio", user_l.p50 / builtin_l.p50);
  Result("p99_ratio", user_l.p99 / builtin_l.p99);

  // 3. Faults, with built-in ops running beside them on their own connection.
  v1::RegisterKernelResponse trap_reg;
  if (grpc::Status st = admin.Register(trap_spec, &trap_reg); !st.ok())
    Fail("RegisterKernel " + std::string(kTrapName), st);
  auto side = Connect(o.target, 1, client::ClientOptions(256, kCallTimeout));
  std::atomic<bool> stop{false};
  BuiltinLoop quiet, across;
  quiet.Run(*side, o, stop, o.quiet_calls);
  std::thread bg([&] { across.Run(*side, o, stop, -1); });
  // The faults start once the built-in loop runs: its calls span them all.
  while (!across.started.load()) std::this_thread::yield();
  const v1::ExecuteRequest trap_call = ScaleCall(kTrapName, "", o.device, input.x());
  std::vector<double> trap_ms, replace_ms;
  int wrong_code = 0, retries = 0;
  std::string wrong;
  bool gave_up = false;
  for (int i = 0; i < o.faults && !gave_up; ++i) {
    v1::ExecuteResponse out;
    t0 = Clock::now();
    grpc::Status st = c.Execute(trap_call, &out, kCallTimeout);
    trap_ms.push_back(MsSince(t0));
    if (st.error_code() != grpc::StatusCode::INTERNAL) {
      if (wrong_code++ == 0)
        wrong = client::StatusName(st.error_code()) + ": " + st.error_message();
    }
    // The sandbox's replacement: until the user scale answers again.
    t0 = Clock::now();
    for (;;) {
      st = c.Execute(user_call, &out, kCallTimeout);
      if (st.ok()) break;
      ++retries;
      if (MsSince(t0) > 30000) {
        std::fprintf(
            stderr, "user_kernel_bench: the user scale still fails 30 s after fault %d: %s: %s\n",
            i + 1, client::StatusName(st.error_code()).c_str(), st.error_message().c_str());
        gave_up = true;
        break;
      }
    }
    replace_ms.push_back(MsSince(t0));
  }
  stop.store(true);
  bg.join();
  bool healthy = true;
  if (grpc::Status st = c.GetServerInfo(&info); !st.ok()) Fail("GetServerInfo", st);
  for (const auto& d : info.devices()) healthy = healthy && d.healthy();
  int64_t counted_faults = -1;
  v1::ListUserKernelsResponse listed;
  if (admin.List(&listed).ok())
    for (const auto& k : listed.kernels())
      if (k.kernel().name() == kTrapName) counted_faults = k.faults();
  (void)admin.Unregister(kTrapName);
  (void)admin.Unregister(kScaleName);

  const Latency trap_l = Summarize(trap_ms), replace_l = Summarize(replace_ms);
  const Latency qs = Summarize(quiet.scale_us), qn = Summarize(quiet.rmsnorm_us);
  const Latency as = Summarize(across.scale_us), an = Summarize(across.rmsnorm_us);
  Result("faults", static_cast<double>(trap_ms.size()));
  Result("faults_wrong_code", wrong_code);
  Result("faults_counted", static_cast<double>(counted_faults));
  Result("trap_call_p50_ms", trap_l.p50);
  Result("trap_call_max_ms", trap_l.max);
  Result("replace_p50_ms", replace_l.p50);
  Result("replace_max_ms", replace_l.max);
  Result("replace_retries", retries);
  Result("builtin_calls_across_faults", static_cast<double>(across.calls));
  Result("builtin_errors_across_faults", static_cast<double>(across.errors));
  Result("builtin_errors_quiet", static_cast<double>(quiet.errors));
  Result("builtin_scale_p99_us_quiet", qs.p99);
  Result("builtin_scale_p99_us_across_faults", as.p99);
  Result("builtin_rmsnorm_p99_us_quiet", qn.p99);
  Result("builtin_rmsnorm_p99_us_across_faults", an.p99);
  Result("devices_healthy", healthy ? 1 : 0);

  const double cold_total = cold_reg_ms + cold_first_ms, ratio = user_l.p50 / builtin_l.p50;
  std::printf("\n%-44s %22s %12s %4s\n", "", "measured", "goal", "met");
  std::printf("%-44s %22.1f %12s %4s\n", "1. cold register + first call, ms", cold_total, "<= 2000",
              YesNo(cold_total <= 2000));
  char parts[64];
  std::snprintf(parts, sizeof parts, "%.1f / %.1f (%.3f)", cold_reg_ms, cold_first_ms,
                cold.compile_seconds());
  std::printf("%-44s %22s\n", "   register / first call, ms (compile s)", parts);
  std::printf("%-44s %22.2f %12s %4s\n", "   warm re-register (JIT cache), ms", warm_reg_ms,
              "<= 20", YesNo(warm_reg_ms <= 20));
  std::printf("%-44s %22.2f\n", "   warm first call, ms", warm_first_ms);
  std::printf(
      "%-44s %22s %12s %4s\n", "   cache hit cold / warm",
      (std::string(cold.cache_hit() ? "yes" : "no") + " / " + (warm.cache_hit() ? "yes" : "no"))
          .c_str(),
      "no / yes", YesNo(!cold.cache_hit() && warm.cache_hit()));
  std::printf("%-44s %10.1f / %9.1f\n", "2. call p50 user / built-in, us", user_l.p50,
              builtin_l.p50);
  std::printf("%-44s %10.1f / %9.1f\n", "   call p99 user / built-in, us", user_l.p99,
              builtin_l.p99);
  std::printf("%-44s %22.3f %12s %4s\n", "   p50 ratio user / built-in", ratio, "<= 1.3",
              YesNo(ratio <= 1.3));
  std::printf("%-44s %22s %12s %4s\n",
              ("   same bytes (" + user_backend + " / " + builtin_backend + ")").c_str(),
              YesNo(same), "yes", YesNo(same));
  std::printf("%-44s %10.1f / %9.1f %12s %4s\n", "3. replacement after a fault p50 / max, ms",
              replace_l.p50, replace_l.max, "<= 1000", YesNo(replace_l.max <= 1000));
  std::printf("%-44s %22zu\n", "   faults injected (__trap())", trap_ms.size());
  std::printf("%-44s %10.1f / %9.1f\n", "   the faulting call p50 / max, ms", trap_l.p50,
              trap_l.max);
  std::printf("%-44s %22d %12s %4s\n", "   faults not answered INTERNAL", wrong_code, "0",
              YesNo(wrong_code == 0));
  std::printf("%-44s %22lld %12s %4s\n",
              ("   built-in errors in " + std::to_string(across.calls) + " calls").c_str(),
              static_cast<long long>(across.errors), "0",
              YesNo(across.errors == 0 && across.calls > 0));
  std::printf("%-44s %10.1f / %9.1f\n", "   built-in scale p99 quiet / across, us", qs.p99, as.p99);
  std::printf("%-44s %10.1f / %9.1f\n", "   built-in rmsnorm p99 quiet / across, us", qn.p99,
              an.p99);
  std::printf("%-44s %22s %12s %4s\n", "   devices healthy after", YesNo(healthy), "yes",
              YesNo(healthy));
  if (wrong_code > 0) std::printf("first fault not answered INTERNAL: %s\n", wrong.c_str());
  if (across.errors > 0) std::printf("first built-in error: %s\n", across.first_error.c_str());
  if (!same) std::printf("the user scale's output differs from the built-in's\n");

  if (!o.json.empty()) {
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "user_kernel_bench: cannot write %s\n", o.json.c_str());
      return 1;
    }
    std::fprintf(f,
                 "{\"bench\": \"user_kernel_bench\", \"device\": \"%s\", \"gpu\": \"%s\", "
                 "\"git_revision\": \"%s\", \"elems\": %lld, \"via\": \"%s\", "
                 "\"builtin_backend\": \"%s\", \"iters\": %d",
                 JsonEscape(o.device).c_str(), JsonEscape(gpu).c_str(),
                 JsonEscape(info.git_revision()).c_str(), static_cast<long long>(o.elems),
                 o.via.c_str(), JsonEscape(builtin_backend).c_str(), o.iters);
    for (const auto& kv : g_results) std::fprintf(f, ", \"%s\": %.6g", kv.first.c_str(), kv.second);
    std::fprintf(f, "}\n");
    std::fclose(f);
  }
  return same && wrong_code == 0 && !gave_up ? 0 : 1;
}

int Main(int argc, char** argv) {
  // Line by line: a refusal on stderr comes after what stdout said before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  CLI::App app{"user_kernel_bench: user kernels against a GPU daemon (see the file's header)",
               "user_kernel_bench"};
  // A repeated flag takes its last value: a script's override after its defaults.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--target", o.target,
                 "the daemon: HOST:PORT or unix:/path (registering needs an admin)")
      ->type_name("ADDR")
      ->required();
  app.add_option("--device", o.device, "the GPU the kernels run on")->capture_default_str();
  app.add_option("--elems", o.elems, "float32 elements of the scale calls' input")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--iters", o.iters, "calls of each scale in part 2")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--faults", o.faults, "faults injected in part 3")
      ->check(client::IntAtLeast(1))
      ->capture_default_str();
  app.add_option("--quiet_calls", o.quiet_calls, "the built-in loop's calls before the faults")
      ->check(client::IntAtLeast(0))
      ->capture_default_str();
  app.add_option("--via", o.via, "the input: in a buffer kerneld allocated, or inline")
      ->check(CLI::IsMember({"buffer", "inline"}))
      ->capture_default_str();
  app.add_option("--builtin_backend", o.builtin_backend,
                 "the built-in scale's backend (\"\": the scheduler's choice)")
      ->capture_default_str();
  app.add_option("--json", o.json, "also write the figures as one JSON object")->type_name("FILE");
  if (std::optional<int> rc = ParseFlags(app, argc, argv)) return *rc;
  return Run(o);
}

}  // namespace
}  // namespace kerneld::bench

int main(int argc, char** argv) { return kerneld::bench::Main(argc, argv); }
