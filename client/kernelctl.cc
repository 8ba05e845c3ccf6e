// kernelctl: command-line client for kerneld.
//
//   kernelctl info
//   kernelctl list [OP]
//   kernelctl health
//   kernelctl run scale --dtype float16 --shape 4096 --attr factor=2.0 --check
//   kernelctl perf scale --shape 16 --attr factor=2 --concurrency 1,8,32 --compare-floor ADDR
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <regex>
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
#include "kerneld/check.h"
#include "kerneld/percentile.h"
#include "perf.h"
#include "reference.h"
#include "replay.h"
#include "tensor_util.h"

#ifdef KERNELD_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include <cstring>

namespace v1 = kerneld::v1;
using namespace kerneld::client;
using kerneld::Percentile;

namespace {

const char kUsage[] = R"(kernelctl: a client for kerneld

usage: kernelctl [--target ADDR] [--lb POLICY] [--tls_ca F] [--tls_cert F --tls_key F] [--token T]
                 COMMAND [options]
  --target ADDR   daemon address (default $KERNELD_TARGET or 127.0.0.1:50051; unix:/path;
                  dns:///host:port; ipv4:ADDR:PORT,ADDR:PORT for several)
  --lb POLICY     pick_first (gRPC's default) or round_robin: spread requests over every
                  address the target resolves to (default $KERNELD_LB)
  --tls_ca FILE   connect with TLS, verifying the daemon against this CA (PEM)
  --tls_cert FILE --tls_key FILE
                  client certificate and key for mutual TLS (PEM)
  --token T       bearer token (default $KERNELD_TOKEN); see docs/security.md

commands:
  info                         server version, CUDA versions, devices, backends
  list [OP]                    ops with inputs, outputs, attrs, implementations
  health                       grpc.health.v1 status
  buffers list [--all]         your buffers (--all: every principal's; admin role)
  buffers register-shm NAME BYTES [--offset N] [--lease S]
                               register an existing POSIX shared-memory object; prints its id
  buffers renew ID | buffers unregister ID
  replay TRACE [--concurrency N] [--speed X]
                               re-run a workload captured with kerneld --trace_file, with
                               fresh random data; prints per op throughput, p50/p90/p99
                               and the recorded latencies (--speed X keeps the recorded
                               arrival times, X times faster; default: as fast as possible)
  run OP [options]             run OP on random inputs
      --dtype T                float16 | bfloat16 | float32 (default float32)
      --shape S                shape of the first input, e.g. 4096 or 16x4096; the others
                               follow the op's shape rules (rmsnorm 16x4096: weight 4096)
      --input NAME=DTYPE:SHAPE override one input (e.g. positions=int32:16)
      --attr K=V               attr (repeatable); V is a number, true/false or text
      --backend B --device D   scheduler hints
      --repeat N               requests to send (default 1; latency percentiles)
      --stream                 send the repeats on one ExecuteStream, ping-pong (one in
                               flight): each latency is that request's own round trip
      --pipeline N             with --stream: up to N requests in flight (latencies then
                               include waiting behind the earlier ones)
      --check                  compare with a float64 host reference
      --seed N                 random seed (default 1)
      --via MODE               how tensors travel: inline (default), shm (POSIX shared
                               memory), ipc (client cudaMalloc + CUDA IPC), server-buffer
                               (AllocateBuffer); buffer modes pass references, zero copy
      --gpu N                  CUDA device of this process for ipc/server-buffer (default 0)
  perf OP [run's input options] [options]
                               load generator (like perf_analyzer): per level, throughput,
                               client p50/p90/p99/p99.9, kerneld's stage breakdown, errors
                               by code, client CPU per request; see docs/performance.md
      --concurrency 1,4,16     closed loop: levels of N clients, one request in flight each
      --request-rate R[,R2]    open loop instead: R requests/s on a fixed schedule (unary)
      --connections N          share N connections (default: one per client)
      --mode unary|stream      unary Execute, or one ExecuteStream per client (ping-pong)
      --window-ms MS           measurement window (default 1000); a level ends when three
                               windows in a row agree within 10% in throughput and p50
      --max-windows N          at most N windows per level (default 10)
      --compare-floor ADDR     run each level against the floor server at ADDR too
                               (bench/echo_floor_server) and print kerneld / floor ratios;
                               with --via ipc the buffer is registered there too, and a
                               floor started with --kernel scales it on the GPU
      --json FILE              write one JSON record per level and target
)";

// Shared with the buffers subcommands (cli_flags.h).
std::string Flag(std::vector<std::string>& args, const std::string& name, const std::string& def) {
  return kerneld::client::TakeFlag(args, name, def);
}
std::vector<std::string> Flags(std::vector<std::string>& args, const std::string& name) {
  return kerneld::client::TakeFlags(args, name);
}
bool Has(std::vector<std::string>& args, const std::string& name) {
  return kerneld::client::TakeBool(args, name);
}

int Fail(const grpc::Status& st) {
  std::fprintf(stderr, "kernelctl: %s: %s\n", std::to_string(st.error_code()).c_str(),
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
  return 0;
}

int List(KernelClient& c, const std::string& name) {
  v1::ListKernelsResponse r;
  if (auto st = c.ListKernels(&r, name); !st.ok()) return Fail(st);
  for (const auto& k : r.kernels()) {
    std::printf("%s: %s\n", k.name().c_str(), k.doc().c_str());
    for (const auto& i : k.inputs()) {
      std::printf("  in  %-14s %s {", i.name().c_str(), i.shape().c_str());
      for (int j = 0; j < i.dtypes_size(); ++j)
        std::printf(
            "%s%s", j ? ", " : "",
            std::string(kerneld::DTypeName(static_cast<kerneld::DType>(i.dtypes(j)))).c_str());
      std::printf("}\n");
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
  }
  return 0;
}

// A shape rule from the server's schema that is safe to parse: items are
// "...", a constant, or [k*]symbol ("[..., 2*d]"). Anything else is left to --shape.
bool SimplePattern(const std::string& text) {
  static const std::regex kItem(R"(\s*(\.\.\.|\d{1,9}|(\d{1,9}\s*\*\s*)?[A-Za-z_]\w{0,63})\s*)");
  if (text.size() < 2 || text.size() > 512 || text.front() != '[' || text.back() != ']')
    return false;
  std::stringstream ss(text.substr(1, text.size() - 2));
  std::string item;
  int ellipses = 0;
  while (std::getline(ss, item, ',')) {
    if (!std::regex_match(item, kItem)) return false;
    if (item.find("...") != std::string::npos) ++ellipses;
  }
  return ellipses <= 1;
}

// Each input's dtype and shape for `run`: --shape is the first input's
// shape; the others follow the schema's symbolic rules bound from it
// (rmsnorm --shape 16x4096 sends weight [4096]). An input whose rule
// names a symbol the first input does not bind, or says "[...]", takes
// --shape too. An input that does not accept --dtype takes its first dtype.
std::map<std::string, std::pair<kerneld::DType, std::vector<int64_t>>> InferInputs(
    const v1::KernelInfo& k, kerneld::DType dtype, const std::vector<int64_t>& shape) {
  std::map<std::string, std::pair<kerneld::DType, std::vector<int64_t>>> out;
  kerneld::ShapeBindings bind;
  bool bound = false;
  for (const auto& in : k.inputs()) {
    kerneld::DType dt = dtype;
    bool accepts = false;
    for (int d : in.dtypes()) accepts = accepts || d == static_cast<int>(dtype);
    if (!accepts && in.dtypes_size() > 0) dt = static_cast<kerneld::DType>(in.dtypes(0));
    std::vector<int64_t> s = shape;
    if (SimplePattern(in.shape())) {
      const auto pat = kerneld::ShapePattern::Parse(in.shape());
      if (!bound) {
        bound = kerneld::MatchShape(k.name(), in.name(), pat, shape, &bind).ok();
      } else if (!pat.any) {
        kerneld::Shape eval;
        if (kerneld::EvalShape(k.name(), pat, bind, &eval).ok()) s = eval;
      }
    }
    out[in.name()] = {dt, s};
  }
  return out;
}

// What `run` and `perf` send: the request with its random inputs (inline,
// or in a registered buffer for --via shm/ipc/server-buffer), built from the
// op's schema and the shared options (--dtype --shape --input --attr
// --backend --device --via --gpu --seed). Callers take their own options out
// of args first; anything left over is an error.
struct Prepared {
  v1::ExecuteRequest req;
  HostTensors inputs;          // the host values, for --check
  kerneld::AttrMap attrs;      // the attrs, for --check
  v1::ListKernelsResponse lk;  // the op's schema
  std::string via;
  std::unique_ptr<SharedBuffer> buf;  // --via other than inline
};

// Returns -1 when *p is ready, else the exit status.
int PrepareRequest(KernelClient& c, const std::string& op, std::vector<std::string>& args,
                   Prepared* p) {
  v1::ExecuteRequest& req = p->req;
  HostTensors& inputs = p->inputs;
  v1::ListKernelsResponse& lk = p->lk;
  std::unique_ptr<SharedBuffer>& buf = p->buf;
  auto dtype = kerneld::ParseDType(Flag(args, "--dtype", "float32"));
  if (!dtype) return std::fprintf(stderr, "kernelctl: unknown --dtype\n"), 2;
  std::vector<int64_t> shape;
  if (!ParseShape(Flag(args, "--shape", "1024"), &shape))
    return std::fprintf(stderr, "kernelctl: bad --shape\n"), 2;
  std::map<std::string, std::pair<kerneld::DType, std::vector<int64_t>>> overrides;
  for (const auto& spec : Flags(args, "--input")) {
    auto eq = spec.find('='), colon = spec.find(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq)
      return std::fprintf(stderr, "kernelctl: --input wants NAME=DTYPE:SHAPE\n"), 2;
    auto dt = kerneld::ParseDType(spec.substr(eq + 1, colon - eq - 1));
    std::vector<int64_t> s;
    if (!dt || !ParseShape(spec.substr(colon + 1), &s))
      return std::fprintf(stderr, "kernelctl: bad --input %s\n", spec.c_str()), 2;
    overrides[spec.substr(0, eq)] = {*dt, s};
  }
  req.set_op(op);
  req.set_backend(Flag(args, "--backend", ""));
  req.set_device(Flag(args, "--device", ""));
  kerneld::AttrMap& attrs = p->attrs;
  for (const auto& kv : Flags(args, "--attr")) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) return std::fprintf(stderr, "kernelctl: --attr wants K=V\n"), 2;
    v1::AttrValue a = ParseAttr(kv.substr(eq + 1));
    (*req.mutable_attrs())[kv.substr(0, eq)] = a;
    attrs[kv.substr(0, eq)] = ToAttr(a);
  }
  const std::string via = p->via = Flag(args, "--via", "inline");
  [[maybe_unused]] const int gpu = std::atoi(Flag(args, "--gpu", "0").c_str());  // ipc modes only
  if (via != "inline" && via != "shm" && via != "ipc" && via != "server-buffer")
    return std::fprintf(stderr, "kernelctl: --via is inline, shm, ipc or server-buffer\n"), 2;
  std::mt19937_64 rng(std::strtoull(Flag(args, "--seed", "1").c_str(), nullptr, 10));
  if (!args.empty())
    return std::fprintf(stderr, "kernelctl: unexpected '%s'\n", args[0].c_str()), 2;

  // Input names come from the server's schema.
  if (auto st = c.ListKernels(&lk, op); !st.ok()) return Fail(st);
  if (lk.kernels_size() == 0) return std::fprintf(stderr, "kernelctl: no op '%s'\n", op.c_str()), 2;
  const auto specs = InferInputs(lk.kernels(0), *dtype, shape);
  for (const auto& in : lk.kernels(0).inputs()) {
    auto it = overrides.find(in.name());
    const auto& [dt, shp] = specs.at(in.name());
    HostTensor t = it != overrides.end() ? Random(it->second.first, it->second.second, rng, 0, 64)
                   : kerneld::IsFloating(dt) ? Random(dt, shp, rng)
                                             : Random(dt, shp, rng, 0, 2);
    ToProto(t, &(*req.mutable_inputs())[in.name()]);
    inputs[in.name()] = std::move(t);
  }

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

int Run(KernelClient& c, const std::string& op, std::vector<std::string>& args) {
  const int repeat = std::max(1, std::atoi(Flag(args, "--repeat", "1").c_str()));
  const bool stream = Has(args, "--stream");
  // --pipeline N: up to N requests in flight on the stream; latencies then
  // include waiting behind the earlier ones. The default (1) is ping-pong.
  const int pipeline = std::max(1, std::atoi(Flag(args, "--pipeline", "1").c_str()));
  const bool check = Has(args, "--check");
  Prepared p;
  if (int rc = PrepareRequest(c, op, args, &p); rc >= 0) return rc;
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
      return std::fprintf(stderr, "kernelctl: %s\n", resp.status().message().c_str()), 1;
  } else {
    for (int i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      if (auto st = c.Execute(req, &resp); !st.ok()) return Fail(st);
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

int Perf(KernelClient& c, const std::string& target, const std::string& op,
         std::vector<std::string>& args) {
  PerfOptions o;
  o.target = target;
  o.lb_policy = c.options().lb_policy;  // the global --lb applies to perf's own connections
  std::vector<double> levels;
  if (!ParsePositiveList(Flag(args, "--concurrency", "1"), &levels))
    return std::fprintf(stderr, "kernelctl: --concurrency wants N[,N...]\n"), 2;
  o.concurrency.clear();
  for (double l : levels) o.concurrency.push_back(static_cast<int>(l));
  if (const std::string r = Flag(args, "--request-rate", ""); !r.empty())
    if (!ParsePositiveList(r, &o.request_rates))
      return std::fprintf(stderr, "kernelctl: --request-rate wants R[,R...]\n"), 2;
  o.connections = std::max(0, std::atoi(Flag(args, "--connections", "0").c_str()));
  const std::string mode = Flag(args, "--mode", "unary");
  if (mode != "unary" && mode != "stream")
    return std::fprintf(stderr, "kernelctl: --mode is unary or stream\n"), 2;
  o.mode = mode == "stream" ? PerfMode::kStream : PerfMode::kUnary;
  if (o.mode == PerfMode::kStream && !o.request_rates.empty())
    return std::fprintf(stderr, "kernelctl: --request-rate sends unary requests\n"), 2;
  o.window_ms = std::max(10, std::atoi(Flag(args, "--window-ms", "1000").c_str()));
  o.max_windows = std::max(3, std::atoi(Flag(args, "--max-windows", "10").c_str()));
  o.floor_target = Flag(args, "--compare-floor", "");
  o.json_path = Flag(args, "--json", "");
  Prepared p;
  if (int rc = PrepareRequest(c, op, args, &p); rc >= 0) return rc;
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* env = std::getenv("KERNELD_TARGET");
  std::string target = Flag(args, "--target", env ? env : "127.0.0.1:50051");
  // --help anywhere (kernelctl replay --help) prints the usage and touches
  // nothing: "replay --help" used to open a file named "--help".
  const bool help = std::find_if(args.begin(), args.end(), [](const std::string& a) {
                      return a == "--help" || a == "-h";
                    }) != args.end();
  if (args.empty() || args[0] == "help" || help) {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  ClientSecurity sec;
  sec.tls_ca = Flag(args, "--tls_ca", "");
  sec.tls_cert = Flag(args, "--tls_cert", "");
  sec.tls_key = Flag(args, "--tls_key", "");
  const char* token_env = std::getenv("KERNELD_TOKEN");
  sec.token = Flag(args, "--token", token_env ? token_env : "");
  SetDefaultSecurity(sec);
  const char* lb_env = std::getenv("KERNELD_LB");
  ClientOptions copts{256, std::chrono::milliseconds(60000)};
  copts.lb_policy = Flag(args, "--lb", lb_env ? lb_env : "");
  if (std::string why = CheckLbPolicy(copts.lb_policy); !why.empty())
    return std::fprintf(stderr, "kernelctl: --lb: %s\n", why.c_str()), 2;
  KernelClient c(target, copts);
  if (!c.init_status().ok())
    return std::fprintf(stderr, "kernelctl: %s\n", c.init_status().error_message().c_str()), 2;
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "info") return Info(c);
  if (cmd == "list") return List(c, args.empty() ? "" : args[0]);
  if (cmd == "health") {
    bool serving = false;
    auto st = c.Health("", &serving);
    if (!st.ok()) return Fail(st);
    std::printf("%s\n", serving ? "SERVING" : "NOT_SERVING");
    return serving ? 0 : 1;
  }
  if (cmd == "buffers") return BuffersCommand(c, args);
  if (cmd == "replay") {
    if (args.empty()) return std::fprintf(stderr, "kernelctl: replay needs a trace file\n"), 2;
    std::string path = args[0];
    args.erase(args.begin());
    ReplayOptions opt;
    opt.concurrency = std::atoi(Flag(args, "--concurrency", "4").c_str());
    opt.speed = std::strtod(Flag(args, "--speed", "0").c_str(), nullptr);
    if (!args.empty())
      return std::fprintf(stderr, "kernelctl: unexpected '%s'\n", args[0].c_str()), 2;
    std::map<std::string, OpReplayStats> stats;
    double secs = 0;
    std::string err;
    if (!Replay(c, path, opt, &stats, &secs, &err))
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
  if (cmd == "run") {
    if (args.empty()) return std::fprintf(stderr, "kernelctl: run needs an op\n"), 2;
    std::string op = args[0];
    args.erase(args.begin());
    return Run(c, op, args);
  }
  if (cmd == "perf") {
    if (args.empty()) return std::fprintf(stderr, "kernelctl: perf needs an op\n"), 2;
    std::string op = args[0];
    args.erase(args.begin());
    return Perf(c, target, op, args);
  }
  std::fprintf(stderr, "kernelctl: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return 2;
}
