// kernelctl: command-line client for kerneld. `kernelctl --help` lists the
// commands; `kernelctl COMMAND --help` describes one.
//
//   kernelctl info
//   kernelctl list [OP]
//   kernelctl health
//   kernelctl run scale --dtype float16 --shape 4096 --attr factor=2.0 --check
//   kernelctl perf scale --shape 16 --attr factor=2 --concurrency 1,8,32 --compare-floor ADDR
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <semaphore>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "buffer_commands.h"
#include "buffers.h"
#include "cli_flags.h"
#include "client.h"
#include "credentials.h"
#include "graph_commands.h"
#include "input_gen.h"
#include "jit_commands.h"
#include "kernel_commands.h"
#include "kerneld/percentile.h"
#include "lane_client.h"
#include "lane_perf.h"
#include "perf.h"
#include "reference.h"
#include "replay.h"
#include "tune_command.h"
#include "tensor_util.h"

#ifdef KERNELD_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace v1 = kerneld::v1;
using namespace kerneld::client;
using kerneld::Percentile;

namespace {

// The options every command shares; the global ones go before or after
// the command.
struct GlobalFlags {
  std::string target = "127.0.0.1:50051", lb, tls_ca, tls_cert, tls_key, token;
  std::string lane;  // --lane: the same-host lane's socket (docs/lane.md)
};

// What `run` and `perf` build their request from.
struct RequestFlags {
  std::string dtype = "float32", shape = "1024", backend, device, via = "inline";
  std::vector<std::string> inputs, attrs;
  int gpu = 0;
  int priority = 0;  // ExecuteRequest.priority
  uint64_t seed = 1;
  CLI::Option *dtype_opt = nullptr, *gpu_opt = nullptr;
};

struct RunFlags {
  int repeat = 1, pipeline = 1;
  bool stream = false, check = false;
};

struct PerfFlags {
  std::string concurrency = "1", request_rate, mode = "unary", compare_floor, json;
  int connections = 0, window_ms = 1000, max_windows = 10;
  CLI::Option *concurrency_opt = nullptr, *connections_opt = nullptr;
};

struct ReplayFlags {
  std::string trace;
  int concurrency = 4;
  double speed = 0;
};

const char kGlobalsNote[] =
    "Global options (--target, --lb, --tls-ca, --tls-cert, --tls-key, --token) go before or "
    "after the command: kernelctl --help describes them. Every --word-word option also answers "
    "to --word_word.";

int Fail(const grpc::Status& st) {
  std::fprintf(stderr, "kernelctl: %s: %s\n", StatusName(st.error_code()).c_str(),
               st.error_message().c_str());
  if (std::string hint = TlsConnectionHint(st, DefaultSecurity()); !hint.empty())
    std::fprintf(stderr, "kernelctl: %s\n", hint.c_str());
  return 1;
}

v1::AttrValue ParseAttr(const std::string& v) {
  v1::AttrValue a;
  char* end = nullptr;
  if (v == "true" || v == "false") {
    a.set_b(v == "true");
  } else if (long long i = std::strtoll(v.c_str(), &end, 10); !v.empty() && *end == '\0') {
    a.set_i(i);
  } else if (double d = std::strtod(v.c_str(), &end); !v.empty() && *end == '\0') {
    a.set_f(d);
  } else {
    a.set_s(v);
  }
  return a;
}

kerneld::AttrValue ToAttr(const v1::AttrValue& a) {
  switch (a.value_case()) {
    case v1::AttrValue::kF:
      return a.f();
    case v1::AttrValue::kI:
      return static_cast<int64_t>(a.i());
    case v1::AttrValue::kB:
      return a.b();
    default:
      return a.s();
  }
}

// --attr K=V and --input NAME=DTYPE:SHAPE, checked as they are parsed.
CLI::Validator AttrText() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const auto eq = s.find('=');
        return eq == std::string::npos || eq == 0 ? "expected K=V, got '" + s + "'" : "";
      },
      "");
}

CLI::Validator InputText() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const auto eq = s.find('=');
        const auto colon = eq == std::string::npos ? eq : s.find(':', eq);
        std::vector<int64_t> shape;
        if (eq == 0 || colon == std::string::npos ||
            !kerneld::ParseDType(s.substr(eq + 1, colon - eq - 1)) ||
            !ParseShape(s.substr(colon + 1), &shape))
          return "expected NAME=DTYPE:SHAPE (positions=int32:16), got '" + s + "'";
        return "";
      },
      "");
}

CLI::Validator LbText() {
  return CLI::Validator([](std::string& s) { return CheckLbPolicy(s); }, "");
}

void AddRequestFlags(CLI::App* sub, RequestFlags* f) {
  f->dtype_opt = sub->add_option("--dtype", f->dtype,
                                 "the first input's dtype, and every other input's that takes it "
                                 "(float16 | bfloat16 | float32); one the first input does not "
                                 "take is an error")
                     ->type_name("DTYPE")
                     ->check(DTypeText())
                     ->capture_default_str();
  sub->add_option("--shape", f->shape,
                  "shape of the first input, e.g. 4096 or 16x4096; the others follow the op's "
                  "shape rules (rmsnorm 16x4096: weight 4096)")
      ->type_name("SHAPE")
      ->check(ShapeText())
      ->capture_default_str();
  sub->add_option("--input", f->inputs,
                  "override one input's dtype and shape (repeatable), e.g. positions=int32:16")
      ->type_name("NAME=DTYPE:SHAPE")
      ->check(InputText())
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--attr", f->attrs, "attr K=V (repeatable); V is a number, true/false or text")
      ->type_name("K=V")
      ->check(AttrText())
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--backend", f->backend, "scheduler hint: the backend (cpu, cuda, ...)")
      ->type_name("BACKEND");
  sub->add_option("--device", f->device, "scheduler hint: the device (cpu, cuda:0, ...)")
      ->type_name("DEVICE");
  sub->add_option("--priority", f->priority,
                  "the request's priority: higher runs first on a busy device (default 0)")
      ->type_name("N");
  sub->add_option("--via", f->via,
                  "how tensors travel: inline, shm (POSIX shared memory), ipc (client "
                  "cudaMalloc + CUDA IPC), server-buffer (AllocateBuffer); buffer modes pass "
                  "references, zero copy")
      ->type_name("MODE")
      ->check(CLI::IsMember({"inline", "shm", "ipc", "server-buffer"}))
      ->capture_default_str();
  f->gpu_opt =
      sub->add_option("--gpu", f->gpu, "CUDA device of this process for --via ipc or server-buffer")
          ->type_name("N")
          ->check(IntAtLeast(0))
          ->capture_default_str();
  sub->add_option("--seed", f->seed, "random seed of the inputs")
      ->type_name("N")
      ->check(IntAtLeast(0))
      ->capture_default_str();
}

// "" when the request flags fit together, else why not.
std::string CheckRequestFlags(const RequestFlags& f) {
  if (f.gpu_opt->count() > 0 && f.via != "ipc" && f.via != "server-buffer")
    return "--gpu picks the CUDA device for --via ipc or server-buffer; with --via " + f.via +
           " it does nothing";
  return "";
}

int Info(KernelClient& c) {
  v1::GetServerInfoResponse r;
  if (auto st = c.GetServerInfo(&r); !st.ok()) return Fail(st);
  std::printf("kerneld %s (git %s)\n", r.version().c_str(), r.git_revision().c_str());
  std::printf("cuda runtime %d, driver %d%s%s\n", r.cuda_runtime_version(), r.cuda_driver_version(),
              r.cuda_status().empty() ? "" : " - ", r.cuda_status().c_str());
  for (const auto& d : r.devices()) {
    std::printf("device %-8s %-5s %s", d.id().c_str(), d.healthy() ? "ok" : "DOWN",
                d.name().c_str());
    if (d.kind() == "cuda")
      std::printf(" sm_%d%d %d SMs %.1f GiB %s", d.compute_capability_major(),
                  d.compute_capability_minor(), d.sm_count(),
                  static_cast<double>(d.total_memory_bytes()) / (1 << 30), d.uuid().c_str());
    std::printf("\n");
  }
  std::printf("backends:");
  for (const auto& b : r.backends()) std::printf(" %s", b.c_str());
  std::printf("\n");
  if (!r.principal().empty())
    std::printf("you are %s%s\n", r.principal().c_str(),
                r.principal_is_connection() ? " (this connection only)" : "");
  return 0;
}

int List(KernelClient& c, const std::string& name) {
  v1::ListKernelsResponse r;
  if (auto st = c.ListKernels(&r, name); !st.ok()) return Fail(st);
  for (const auto& k : r.kernels()) {
    std::printf("%s: %s\n", k.name().c_str(), k.doc().c_str());
    for (int n = 0; n < k.inputs_size(); ++n) {
      const auto& i = k.inputs(n);
      std::printf("  in  %-14s %s {", i.name().c_str(), i.shape().c_str());
      for (int j = 0; j < i.dtypes_size(); ++j)
        std::printf(
            "%s%s", j ? ", " : "",
            std::string(kerneld::DTypeName(static_cast<kerneld::DType>(i.dtypes(j)))).c_str());
      std::printf("}");
      // How `run` draws it, when not uniform values of the rule.
      const v1::InputGeneration g = GenerationOf(k, n);
      if (g.kind() == v1::InputGeneration::PROBABILITIES) std::printf(" random: probabilities");
      if (g.kind() == v1::InputGeneration::INDEX)
        std::printf(" random: indices below %s", g.upper().c_str());
      if (g.kind() == v1::InputGeneration::INDPTR)
        std::printf(" made: offsets into %s, one more than its segments", g.upper().c_str());
      if (g.kind() == v1::InputGeneration::LENGTH)
        std::printf(" random: lengths in [1, %s]", g.upper().c_str());
      if (g.kind() == v1::InputGeneration::PERMUTATION)
        std::printf(" random: distinct indices below %s", g.upper().c_str());
      if (g.kind() == v1::InputGeneration::SEGMENT)
        std::printf(" made: entries split in order into %s", g.upper().c_str());
      if (g.kind() == v1::InputGeneration::MODULO)
        std::printf(" made: entry i mod %s", g.upper().c_str());
      if (!g.shape().empty()) std::printf(" random shape: %s", g.shape().c_str());
      std::printf("\n");
    }
    for (const auto& o : k.outputs())
      std::printf("  out %-14s %s%s%s\n", o.name().c_str(), o.shape().c_str(),
                  o.in_place_of().empty() ? "" : ", in place of ", o.in_place_of().c_str());
    for (const auto& a : k.attrs())
      std::printf("  attr %-13s %s%s %s\n", a.name().c_str(), a.type().c_str(),
                  a.required() ? " (required)" : "", a.doc().c_str());
    for (const auto& im : k.implementations()) {
      std::printf("  impl %-13s priority %d, %s:", im.backend().c_str(), im.priority(),
                  im.requirements().c_str());
      for (const auto& d : im.devices())
        std::printf(" %s=%s", d.device().c_str(),
                    d.eligible() ? "eligible" : ("no (" + d.reason() + ")").c_str());
      std::printf("\n");
      if (!im.priority_note().empty()) std::printf("    %s\n", im.priority_note().c_str());
    }
    // The scheduler's measurements (docs/architecture.md, "Online tuning").
    for (const auto& b : k.tuning()) {
      std::printf("  tuned %s %s on %s: %s (", b.dtypes().c_str(), b.bucket().c_str(),
                  b.device_model().c_str(), b.chosen().empty() ? "-" : b.chosen().c_str());
      for (int i = 0; i < b.times_size(); ++i)
        std::printf("%s%s %.1f us x%lld", i ? ", " : "", b.times(i).backend().c_str(),
                    static_cast<double>(b.times(i).median_ns()) * 1e-3,
                    static_cast<long long>(b.times(i).runs()));
      std::printf(")\n");
    }
  }
  return 0;
}

// What `run` and `perf` send: the request with its random inputs (inline,
// or in a registered buffer for --via shm/ipc/server-buffer), built from the
// op's schema and the shared options (--dtype --shape --input --attr
// --backend --device --via --gpu --seed).
struct Prepared {
  v1::ExecuteRequest req;
  HostTensors inputs;          // the host values, for --check
  kerneld::AttrMap attrs;      // the attrs, for --check
  v1::ListKernelsResponse lk;  // the op's schema
  std::string via;
  std::unique_ptr<SharedBuffer> buf;  // --via other than inline
};

// Returns -1 when *p is ready, else the exit status.
int PrepareRequest(KernelClient& c, const std::string& op, const RequestFlags& f, Prepared* p) {
  v1::ExecuteRequest& req = p->req;
  HostTensors& inputs = p->inputs;
  v1::ListKernelsResponse& lk = p->lk;
  std::unique_ptr<SharedBuffer>& buf = p->buf;
  // The values were validated as the command line was parsed.
  InputRequest want;
  if (f.dtype_opt->count() > 0) want.dtype = kerneld::ParseDType(f.dtype);
  ParseShape(f.shape, &want.shape);
  for (const auto& spec : f.inputs) {
    const auto eq = spec.find('='), colon = spec.find(':', eq);
    std::vector<int64_t> s;
    ParseShape(spec.substr(colon + 1), &s);
    want.overrides[spec.substr(0, eq)] = {*kerneld::ParseDType(spec.substr(eq + 1, colon - eq - 1)),
                                          s};
  }
  req.set_op(op);
  req.set_backend(f.backend);
  req.set_priority(f.priority);
  req.set_device(f.device);
  kerneld::AttrMap& attrs = p->attrs;
  for (const auto& kv : f.attrs) {
    const auto eq = kv.find('=');
    v1::AttrValue a = ParseAttr(kv.substr(eq + 1));
    (*req.mutable_attrs())[kv.substr(0, eq)] = a;
    attrs[kv.substr(0, eq)] = ToAttr(a);
  }
  const std::string via = p->via = f.via;
  [[maybe_unused]] const int gpu = f.gpu;  // ipc modes only
  std::mt19937_64 rng(f.seed);

  // Input names, dtypes, shapes and how to draw them come from the
  // server's schema.
  if (auto st = c.ListKernels(&lk, op); !st.ok()) return Fail(st);
  if (lk.kernels_size() == 0) return std::fprintf(stderr, "kernelctl: no op '%s'\n", op.c_str()), 2;
  std::string error;
  if (!GenerateInputs(lk.kernels(0), want, rng, &inputs, &error))
    return std::fprintf(stderr, "kernelctl: %s\n", error.c_str()), 2;
  for (const auto& [name, t] : inputs) ToProto(t, &(*req.mutable_inputs())[name]);

  if (via != "inline") {
    v1::ExecuteResponse resp;
    // Learn the outputs' dtypes and shapes from one inline run, then lay
    // inputs and outputs out in one shared buffer, 256-byte aligned.
    if (auto st = c.Execute(req, &resp); !st.ok()) return Fail(st);
    auto align = [](uint64_t v) { return (v + 255) & ~uint64_t{255}; };
    uint64_t total = 0;
    std::map<std::string, uint64_t> in_off, out_off;
    for (const auto& [name, t] : req.inputs())
      in_off[name] = total, total = align(total + t.inline_data().size());
    for (const auto& [name, t] : resp.outputs())
      out_off[name] = total, total = align(total + t.inline_data().size());
    total = std::max<uint64_t>(total, 256);
    const auto reg0 = std::chrono::steady_clock::now();
    if (via == "shm") {
      buf = std::make_unique<SharedMemoryBuffer>(c, total, 0, "kernelctl");
#ifdef KERNELD_WITH_CUDA
    } else if (via == "ipc") {
      buf = std::make_unique<CudaIpcBuffer>(c, gpu, total, 0, "kernelctl");
    } else {
      buf = std::make_unique<ServerBuffer>(c, gpu, total, 0, "kernelctl");
#else
    } else {
      return std::fprintf(stderr, "kernelctl: --via %s needs a CUDA build\n", via.c_str()), 2;
#endif
    }
    if (!buf->status().ok()) return Fail(buf->status());
    // Allocation + handle export/open + the Register/Allocate RPC: the
    // one-time cost a client pays before its zero-copy requests.
    std::printf(
        "%s buffer of %llu bytes ready in %.1f us (allocate + register, once)\n", via.c_str(),
        static_cast<unsigned long long>(total),
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - reg0).count());
    for (auto& [name, t] : *req.mutable_inputs()) {
      const std::string& bytes = t.inline_data();
      if (via == "shm") {
        std::memcpy(static_cast<SharedMemoryBuffer*>(buf.get())->data() + in_off[name],
                    bytes.data(), bytes.size());
      } else {
#ifdef KERNELD_WITH_CUDA
        void* base = via == "ipc" ? static_cast<CudaIpcBuffer*>(buf.get())->data()
                                  : static_cast<ServerBuffer*>(buf.get())->data();
        cudaMemcpy(static_cast<char*>(base) + in_off[name], bytes.data(), bytes.size(),
                   cudaMemcpyHostToDevice);
#endif
      }
      std::vector<int64_t> shp(t.shape().begin(), t.shape().end());
      t = buf->Tensor(static_cast<kerneld::DType>(t.dtype()), shp, in_off[name]);
    }
    for (const auto& [name, t] : resp.outputs()) {
      if (!t.has_inline_data()) continue;
      bool in_place = false;
      for (const auto& k : lk.kernels(0).outputs())
        if (k.name() == name && !k.in_place_of().empty()) in_place = true;
      if (in_place) continue;  // written into its input's buffer
      std::vector<int64_t> shp(t.shape().begin(), t.shape().end());
      (*req.mutable_outputs())[name] =
          buf->Tensor(static_cast<kerneld::DType>(t.dtype()), shp, out_off[name]);
    }
  }
  return -1;
}

int Run(KernelClient& c, const std::string& op, const RunFlags& opts, const RequestFlags& f,
        LaneClient* lane = nullptr) {
  const int repeat = opts.repeat;
  const bool stream = opts.stream;
  // --pipeline N: up to N requests in flight on the stream; latencies then
  // include waiting behind the earlier ones. The default (1) is ping-pong.
  const int pipeline = opts.pipeline;
  const bool check = opts.check;
  Prepared p;
  if (int rc = PrepareRequest(c, op, f, &p); rc >= 0) return rc;
  v1::ExecuteRequest& req = p.req;
  const std::string& via = p.via;
  const auto& lk = p.lk;
  auto& buf = p.buf;
  const HostTensors& inputs = p.inputs;
  const kerneld::AttrMap& attrs = p.attrs;
  v1::ExecuteResponse resp;
  std::vector<double> lat_us;
  // The server's own view of each request (ExecutionInfo), to split the
  // round trip into transport, queue and execution.
  std::vector<double> queue_us, exec_us, total_us;
  auto note_info = [&](const v1::ExecuteResponse& r) {
    queue_us.push_back(static_cast<double>(r.info().queue_ns()) / 1e3);
    exec_us.push_back(static_cast<double>(r.info().execute_ns()) / 1e3);
    total_us.push_back(static_cast<double>(r.info().total_ns()) / 1e3);
  };
  // Reads an output that came back as a buffer reference.
  auto fetch = [&](v1::Tensor* t) {
    if (!t->has_buffer() || !buf) return;
    int64_t n = 1;
    for (int64_t d : t->shape()) n *= d;
    std::string bytes(
        static_cast<size_t>(n) * kerneld::ItemSize(static_cast<kerneld::DType>(t->dtype())), '\0');
    if (via == "shm") {
      std::memcpy(bytes.data(),
                  static_cast<SharedMemoryBuffer*>(buf.get())->data() + t->buffer().offset(),
                  bytes.size());
    } else {
#ifdef KERNELD_WITH_CUDA
      cudaDeviceSynchronize();
      void* base = via == "ipc" ? static_cast<CudaIpcBuffer*>(buf.get())->data()
                                : static_cast<ServerBuffer*>(buf.get())->data();
      cudaMemcpy(bytes.data(), static_cast<char*>(base) + t->buffer().offset(), bytes.size(),
                 cudaMemcpyDeviceToHost);
#endif
    }
    t->set_inline_data(bytes);
  };
  if (stream) {
    // Ping-pong (one request in flight) measures each request's own round
    // trip. Writing them all before reading measured the queue: the n-th
    // request waited for the n-1 before it (29-99 ms for 16 elements).
    auto s = c.OpenStream();
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::chrono::steady_clock::time_point> sent(static_cast<size_t>(repeat));
    std::counting_semaphore<> slots(pipeline);
    std::thread reader([&] {
      v1::ExecuteResponse r;
      while (s->Receive(&r)) {
        size_t id = std::stoul(r.request_id());
        lat_us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent[id])
                .count());
        note_info(r);
        resp = r;
        slots.release();
      }
      slots.release(pipeline);  // the stream ended: unblock the writer
    });
    for (int i = 0; i < repeat; ++i) {
      slots.acquire();
      req.set_request_id(std::to_string(i));
      sent[static_cast<size_t>(i)] = std::chrono::steady_clock::now();
      if (!s->Send(req)) break;
    }
    s->CloseSend();
    reader.join();
    if (auto st = s->Finish(); !st.ok()) return Fail(st);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pipeline == 1)
      std::printf("stream (ping-pong, one request in flight): %d requests in %.3f s (%.0f req/s)\n",
                  repeat, secs, repeat / secs);
    else
      std::printf(
          "stream (pipelined, up to %d in flight; latencies include waiting behind earlier "
          "requests): %d requests in %.3f s (%.0f req/s)\n",
          pipeline, repeat, secs, repeat / secs);
    // First against last requests: a latency that grows with the index is
    // queueing, not the service.
    if (lat_us.size() >= 20) {
      const std::vector<double> first(lat_us.begin(), lat_us.begin() + 10);
      const std::vector<double> last(lat_us.end() - 10, lat_us.end());
      std::printf("stream latency by request: first 10 p50 %.1f us, last 10 p50 %.1f us\n",
                  Percentile(first, 0.5), Percentile(last, 0.5));
    }
    if (resp.status().code() != 0)
      return std::fprintf(stderr, "kernelctl: %s: %s\n", StatusName(resp.status().code()).c_str(),
                          resp.status().message().c_str()),
             1;
  } else {
    for (int i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      // --lane: the same request through the same-host lane (docs/lane.md).
      if (auto st = lane != nullptr ? lane->Execute(req, &resp) : c.Execute(req, &resp); !st.ok())
        return Fail(st);
      lat_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      note_info(resp);
    }
  }
  std::printf(
      "%s on %s/%s: server execute %.1f us, total %.1f us; client p50 %.1f us p99 %.1f us "
      "(n=%zu)\n",
      op.c_str(), resp.info().backend().c_str(), resp.info().device().c_str(),
      static_cast<double>(resp.info().execute_ns()) / 1e3,
      static_cast<double>(resp.info().total_ns()) / 1e3, Percentile(lat_us, 0.5),
      Percentile(lat_us, 0.99), lat_us.size());
  std::printf("server p50: queue %.1f us, execute %.1f us, total %.1f us (arrival to completion)\n",
              Percentile(queue_us, 0.5), Percentile(exec_us, 0.5), Percentile(total_us, 0.5));
  if (!check) return 0;
  if (repeat > 1 && buf) {
    bool in_place_op = false;
    for (const auto& k : lk.kernels(0).outputs()) in_place_op |= !k.in_place_of().empty();
    if (in_place_op)
      return std::fprintf(stderr,
                          "kernelctl: --check of an in-place op via a buffer needs --repeat 1\n"),
             2;
  }
  for (auto& [name, t] : *resp.mutable_outputs()) fetch(&t);
  HostTensors ref;
  std::string err;
  if (!Reference(op, inputs, attrs, &ref, &err))
    return std::fprintf(stderr, "kernelctl: %s\n", err.c_str()), 1;
  bool ok = true;
  for (const auto& [name, want] : ref) {
    HostTensor got;
    auto it = resp.outputs().find(name);
    if (it == resp.outputs().end() || !FromProto(it->second, &got)) {
      std::printf("check %s: missing or malformed\n", name.c_str());
      ok = false;
      continue;
    }
    double rtol, atol;
    Tolerance(got.dtype, &rtol, &atol);
    Comparison cmp = Compare(got.values, want.values, rtol, atol);
    std::printf(
        "check %s: max abs err %.3g, max rel err %.3g, %lld of %zu outside rtol=%g atol=%g: %s\n",
        name.c_str(), cmp.max_abs_err, cmp.max_rel_err, static_cast<long long>(cmp.mismatches),
        want.values.size(), rtol, atol, cmp.mismatches == 0 ? "PASS" : "FAIL");
    ok = ok && cmp.mismatches == 0;
  }
  return ok ? 0 : 1;
}

int Perf(KernelClient& c, const std::string& target, const std::string& op, const PerfFlags& pf,
         const RequestFlags& f, const std::string& lane = "", const std::string& token = "") {
  PerfOptions o;
  o.target = target;
  o.lb_policy = c.options().lb_policy;  // the global --lb applies to perf's own connections
  std::vector<double> levels;
  ParsePositiveList(pf.concurrency, &levels);  // validated as it was parsed
  o.concurrency.clear();
  for (double l : levels) o.concurrency.push_back(static_cast<int>(l));
  if (!pf.request_rate.empty()) ParsePositiveList(pf.request_rate, &o.request_rates);
  o.connections = pf.connections;
  o.mode = pf.mode == "stream" ? PerfMode::kStream : PerfMode::kUnary;
  o.window_ms = pf.window_ms;
  o.max_windows = pf.max_windows;
  o.floor_target = pf.compare_floor;
  o.json_path = pf.json;
  Prepared p;
  if (int rc = PrepareRequest(c, op, f, &p); rc >= 0) return rc;
  if (!lane.empty()) {  // the lane beside gRPC, the same request (client/lane_perf.h)
    LanePerfOptions lo;
    lo.lane_path = lane;
    lo.grpc_target = target;
    lo.token = token;
    lo.concurrency = o.concurrency;
    lo.window_ms = o.window_ms;
    return RunLanePerf(lo, p.req);
  }
  // --via ipc: the floor (--kernel) runs its kernel on the same memory, so
  // the allocation is registered there too and the floor's request names it
  // by the floor's id. Other buffers go to the floor as they are: it echoes
  // their references without touching the memory.
#ifdef KERNELD_WITH_CUDA
  if (!o.floor_target.empty() && p.via == "ipc") {
    KernelClient floor(o.floor_target, c.options());
    std::string floor_id;
    const auto* ipc = static_cast<const CudaIpcBuffer*>(p.buf.get());
    if (grpc::Status st = ipc->RegisterAt(floor, "kernelctl perf", 0, &floor_id); !st.ok()) {
      std::fprintf(stderr, "kernelctl perf: registering the buffer with the floor at %s: %s\n",
                   o.floor_target.c_str(), st.error_message().c_str());
      return 1;
    }
    v1::ExecuteRequest floor_req = p.req;
    for (auto* m : {floor_req.mutable_inputs(), floor_req.mutable_outputs()})
      for (auto& [name, t] : *m)
        if (t.has_buffer() && t.buffer().buffer_id() == ipc->id())
          t.mutable_buffer()->set_buffer_id(floor_id);
    const int rc = RunPerf(o, p.req, &floor_req);
    (void)UnregisterBuffer(floor, floor_id);  // the floor's mapping; it exits anyway
    return rc;
  }
#endif
  return RunPerf(o, p.req);
}

int ReplayCommand(KernelClient& c, const ReplayFlags& r) {
  ReplayOptions opt;
  opt.concurrency = r.concurrency;
  opt.speed = r.speed;
  std::map<std::string, OpReplayStats> stats;
  double secs = 0;
  std::string err;
  if (!Replay(c, r.trace, opt, &stats, &secs, &err))
    return std::fprintf(stderr, "kernelctl: %s\n", err.c_str()), 1;
  std::printf("%-22s %7s %9s %9s %9s %9s %11s %11s  %s\n", "op", "sent", "req/s", "p50 us",
              "p90 us", "p99 us", "rec p50 us", "rec p99 us", "codes");
  int64_t total = 0;
  for (auto& [op, s] : stats) {
    std::string codes;
    for (const auto& [code, n] : s.codes) codes += code + "=" + std::to_string(n) + " ";
    std::printf("%-22s %7lld %9.0f %9.1f %9.1f %9.1f %11.1f %11.1f  %s\n", op.c_str(),
                static_cast<long long>(s.sent), static_cast<double>(s.sent) / secs,
                Percentile(s.latency_us, 0.5), Percentile(s.latency_us, 0.9),
                Percentile(s.latency_us, 0.99), Percentile(s.recorded_us, 0.5),
                Percentile(s.recorded_us, 0.99), codes.c_str());
    total += s.sent;
  }
  std::printf("replayed %lld requests in %.3f s (%.0f req/s, concurrency %d)\n",
              static_cast<long long>(total), secs, static_cast<double>(total) / secs,
              opt.concurrency);
  return 0;
}

// The command word, skipping the global options and their values: an
// unknown one is named as such (CLI11 alone says "a subcommand is required").
std::string CommandWord(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-", 0) != 0) return a;
    if (a.find('=') != std::string::npos) continue;
    try {
      const CLI::Option* o = app.get_option(a);
      if (o->get_type_size() != 0 && i + 1 < argc) ++i;  // its value
    } catch (const CLI::OptionNotFound&) {
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelctl: a client for kerneld", "kernelctl"};
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(34);
  // A repeated single-valued option takes its last value (a script's
  // override after its defaults); repeatable ones (--attr, --input) say so.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.fallthrough();  // global options after the command too
  app.require_subcommand(1);
  app.footer(
      "Environment: KERNELD_TARGET, KERNELD_TOKEN and KERNELD_LB give --target, --token and "
      "--lb their defaults. Every --word-word option also answers to --word_word.");

  GlobalFlags g;
  app.add_option("--target", g.target,
                 "daemon address: HOST:PORT, unix:/path, dns:///host:port, "
                 "ipv4:ADDR:PORT,ADDR:PORT for several")
      ->type_name("ADDR")
      ->envname("KERNELD_TARGET")
      ->capture_default_str();
  app.add_option("--lb", g.lb,
                 "pick_first (gRPC's default) or round_robin: spread requests over every "
                 "address the target resolves to")
      ->envname("KERNELD_LB")
      ->type_name("POLICY")
      ->check(LbText());
  app.add_option(Names("--tls-ca"), g.tls_ca,
                 "connect with TLS, verifying the daemon against this CA (PEM)")
      ->type_name("FILE");
  app.add_option(Names("--tls-cert"), g.tls_cert, "client certificate for mutual TLS (PEM)")
      ->type_name("FILE");
  app.add_option(Names("--tls-key"), g.tls_key, "the client certificate's key (PEM)")
      ->type_name("FILE");
  app.add_option("--token", g.token, "bearer token; see docs/security.md")
      ->type_name("TOKEN")
      ->envname("KERNELD_TOKEN");
  app.add_option("--lane", g.lane,
                 "run and perf send Execute through the same-host lane at this socket (the "
                 "daemon's --lane_socket; docs/lane.md); the rest still uses --target")
      ->type_name("PATH")
      ->envname("KERNELD_LANE");

  CLI::App* info = app.add_subcommand("info", "server version, CUDA versions, devices, backends");
  CLI::App* list = app.add_subcommand("list", "ops with inputs, outputs, attrs, implementations");
  std::string list_op;
  list->add_option("OP", list_op, "only this op")->type_name("OP");
  CLI::App* health = app.add_subcommand("health", "grpc.health.v1 status (SERVING: exit 0)");
  BuffersOptions bo;
  CLI::App* buffers = AddBuffersCommand(app, &bo);
  JitOptions jo;
  CLI::App* jit = AddJitCommand(app, &jo);
  KernelOptions ko;
  CLI::App* kernel = AddKernelCommand(app, &ko);
  GraphOptions go;
  CLI::App* graph = AddGraphCommand(app, &go);
  TuneOptions to;
  CLI::App* tune = AddTuneCommand(app, &to);
  tune->footer(kGlobalsNote);

  ReplayFlags rf;
  CLI::App* replay = app.add_subcommand(
      "replay",
      "re-run a workload captured with kerneld --trace_file, with fresh random data; prints per "
      "op throughput, p50/p90/p99 and the recorded latencies");
  replay->add_option("TRACE", rf.trace, "the trace file")->type_name("FILE")->required();
  replay->add_option("--concurrency", rf.concurrency, "requests in flight")
      ->type_name("N")
      ->check(IntAtLeast(1))
      ->capture_default_str();
  replay
      ->add_option("--speed", rf.speed,
                   "keep the recorded arrival times, X times faster (0: as fast as possible)")
      ->type_name("X")
      ->check(NumberAtLeast(0, true))
      ->capture_default_str();

  std::string op;
  RequestFlags run_req, perf_req;
  RunFlags r;
  CLI::App* run = app.add_subcommand("run", "run OP on random inputs drawn from its schema");
  run->add_option("OP", op, "the op (kernelctl list names them)")->type_name("OP")->required();
  AddRequestFlags(run, &run_req);
  run->add_option("--repeat", r.repeat, "requests to send (latency percentiles)")
      ->type_name("N")
      ->check(IntAtLeast(1))
      ->capture_default_str();
  CLI::Option* stream =
      run->add_flag("--stream", r.stream,
                    "send the repeats on one ExecuteStream, ping-pong (one in flight): each "
                    "latency is that request's own round trip");
  run->add_option("--pipeline", r.pipeline,
                  "with --stream: up to N requests in flight (latencies then include waiting "
                  "behind the earlier ones)")
      ->type_name("N")
      ->check(IntAtLeast(1))
      ->needs(stream);
  run->add_flag("--check", r.check, "compare the outputs with a float64 host reference");

  PerfFlags pf;
  CLI::App* perf = app.add_subcommand(
      "perf",
      "load generator (like perf_analyzer): per level, throughput, client p50/p90/p99/p99.9, "
      "kerneld's stage breakdown, errors by code, client CPU per request; a level stops when "
      "a whole window fails. See docs/performance.md");
  perf->add_option("OP", op, "the op (kernelctl list names them)")->type_name("OP")->required();
  AddRequestFlags(perf, &perf_req);
  pf.concurrency_opt =
      perf->add_option("--concurrency", pf.concurrency,
                       "closed loop: levels of N clients, one request in flight each (1,4,16)")
          ->type_name("N[,N...]")
          ->check(PositiveList(true))
          ->capture_default_str();
  CLI::Option* rate =
      perf->add_option(Names("--request-rate"), pf.request_rate,
                       "open loop instead: R requests/s on a fixed schedule (unary), R[,R2...]")
          ->type_name("R[,R...]")
          ->check(PositiveList(false));
  rate->excludes(pf.concurrency_opt);
  pf.connections_opt =
      perf->add_option("--connections", pf.connections, "share N connections (0: one per client)")
          ->type_name("N")
          ->check(IntAtLeast(0))
          ->capture_default_str();
  pf.connections_opt->excludes(rate);
  perf->add_option("--mode", pf.mode, "unary Execute, or one ExecuteStream per client (ping-pong)")
      ->type_name("MODE")
      ->check(CLI::IsMember({"unary", "stream"}))
      ->capture_default_str();
  perf->add_option(Names("--window-ms"), pf.window_ms,
                   "measurement window; a level ends when three windows in a row agree within "
                   "10% in throughput and p50")
      ->type_name("N")
      ->check(IntAtLeast(10))
      ->capture_default_str();
  perf->add_option(Names("--max-windows"), pf.max_windows, "at most N windows per level")
      ->type_name("N")
      ->check(IntAtLeast(3))
      ->capture_default_str();
  perf->add_option(Names("--compare-floor"), pf.compare_floor,
                   "run each level against the floor server at ADDR too (bench/echo_floor_server) "
                   "and print kerneld / floor ratios")
      ->type_name("ADDR");
  perf->add_option("--json", pf.json, "write one JSON record per level and target to FILE")
      ->type_name("FILE");

  for (CLI::App* sub : {info, list, health, buffers, jit, kernel, graph, replay, run, perf})
    sub->footer(kGlobalsNote);
  for (CLI::App* sub : kernel->get_subcommands({})) sub->footer(kGlobalsNote);
  for (CLI::App* sub : buffers->get_subcommands({})) sub->footer(kGlobalsNote);
  for (CLI::App* sub : jit->get_subcommands({})) sub->footer(kGlobalsNote);

  // `kernelctl help [COMMAND]`, and no arguments at all: the usage.
  if (CommandWord(app, argc, argv) == "help") {
    CLI::App* about = &app;
    for (int i = 1; i + 1 < argc; ++i) {
      if (std::string(argv[i]) != "help") continue;
      try {
        about = app.get_subcommand(argv[i + 1]);
      } catch (const CLI::OptionNotFound&) {
      }
      break;
    }
    std::fputs(about->help(about == &app ? "" : "kernelctl").c_str(), stdout);
    return 0;
  }
  if (argc < 2) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // The help of the command it follows: `kernelctl run --help`.
    const CLI::App* about = &app;
    std::string path;
    for (CLI::App* sub = &app; sub != nullptr;) {
      CLI::App* next = nullptr;
      for (CLI::App* s : sub->get_subcommands()) next = s;
      if (next != nullptr) path += (path.empty() ? "" : " ") + sub->get_name(), about = next;
      sub = next;
    }
    std::fputs(about->help(path).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    if (const std::string word = CommandWord(app, argc, argv);
        !word.empty() && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
        app.get_subcommands().empty()) {
      std::fprintf(
          stderr,
          "kernelctl: unknown command '%s' (info, list, health, buffers, jit, tune, kernel, graph, replay, "
          "run, perf); kernelctl --help describes them\n",
          word.c_str());
      return 2;
    }
    std::string where = "kernelctl";
    for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
      sub = sub->get_subcommands().back();
      where += " " + sub->get_name();
    }
    std::fprintf(stderr, "kernelctl: %s\n(%s --help for usage)\n", e.what(), where.c_str());
    return 2;
  }

  // Options that do nothing in the mode given are refused, not ignored.
  std::string why;
  if (run->parsed()) why = CheckRequestFlags(run_req);
  if (perf->parsed()) {
    why = CheckRequestFlags(perf_req);
    if (why.empty() && !pf.request_rate.empty() && pf.mode == "stream")
      why = "--request-rate sends unary requests on a fixed schedule; --mode stream is closed loop";
  }
  if (why.empty() && !g.lane.empty()) {
    if (run->parsed() && r.stream)
      why = "--lane sends unary requests on the lane; drop --stream";
    else if (perf->parsed() &&
             (pf.mode == "stream" || !pf.request_rate.empty() || !pf.compare_floor.empty()))
      why =
          "perf --lane measures closed-loop unary requests beside gRPC; drop --mode stream, "
          "--request-rate and --compare-floor";
  }
  if (!why.empty()) return std::fprintf(stderr, "kernelctl: %s\n", why.c_str()), 2;

  ClientSecurity sec;
  sec.tls_ca = g.tls_ca;
  sec.tls_cert = g.tls_cert;
  sec.tls_key = g.tls_key;
  sec.token = g.token;
  SetDefaultSecurity(sec);
  ClientOptions copts{256, std::chrono::milliseconds(60000)};
  copts.lb_policy = g.lb;
  KernelClient c(g.target, copts);
  if (!c.init_status().ok())
    return std::fprintf(stderr, "kernelctl: %s\n", c.init_status().error_message().c_str()), 2;
  if (info->parsed()) return Info(c);
  if (list->parsed()) return List(c, list_op);
  if (health->parsed()) {
    bool serving = false;
    auto st = c.Health("", &serving);
    if (!st.ok()) return Fail(st);
    std::printf("%s\n", serving ? "SERVING" : "NOT_SERVING");
    return serving ? 0 : 1;
  }
  if (buffers->parsed()) return BuffersCommand(c, bo);
  if (jit->parsed()) return JitCommand(c, jo);
  if (tune->parsed()) return TuneCommand(c, to);
  if (kernel->parsed()) return KernelCommand(c, ko);
  if (graph->parsed()) return GraphCommand(c, g.target, go);
  if (replay->parsed()) return ReplayCommand(c, rf);
  if (run->parsed()) {
    std::unique_ptr<LaneClient> lane;
    if (!g.lane.empty()) {
      // No lane is an error, not a quiet fall back to gRPC.
      grpc::Status st;
      lane = LaneClient::Connect(g.lane, g.token, &st);
      if (!lane) return Fail(st);
    }
    return Run(c, op, r, run_req, lane.get());
  }
  return Perf(c, g.target, op, pf, perf_req, g.lane, g.token);
}
