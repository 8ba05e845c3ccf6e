// The two front ends of one daemon under the same client: KServe v2's
// ModelInfer against kerneld.v1's Execute, on the same op, bytes, backend
// and transport, from one C++ program with the same generated stubs and
// channels, so that what differs between the two p50s is the front end, not
// the load generator (perf_analyzer and kernelctl differ in their own cost:
// bench/kserve_perf.sh). Closed loop, N clients on connections of their
// own, unary, inline tensors: scale on x = float32 [SHAPE], factor 2.
// Rounds alternate the front ends (v1, KServe, v1, ...) so that a host's
// drift falls on both; each level's figures are the medians over rounds.
//
//   kserve_front_bench --target ADDR [--shape 4096] [--clients 1,8,32]
//                      [--seconds 2] [--rounds 3] [--backend cuda] [--json FILE]
//
// Prints one line per level and a RESULT line per level for scripts.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_client.h"
#include "bench_util.h"
#include "inference/grpc_service.grpc.pb.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kb = kerneld::bench;
namespace v1 = kerneld::v1;

namespace {

struct Options {
  std::string target;
  int64_t shape = 4096;
  std::vector<int> clients = {1, 8, 32};
  double seconds = 2;
  int rounds = 3;
  std::string backend;
  std::string json;
};

std::shared_ptr<grpc::Channel> Channel(const std::string& target, int n) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kerneld.bench.connection", n);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  kb::AwaitConnected(*channel, target);
  return channel;
}

v1::ExecuteRequest V1Request(const Options& o, const std::string& bytes) {
  v1::ExecuteRequest r;
  r.set_op("scale");
  v1::Tensor& x = (*r.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(o.shape);
  x.set_inline_data(bytes);
  (*r.mutable_attrs())["factor"].set_f(2.0);
  r.set_backend(o.backend);
  return r;
}

inference::ModelInferRequest KServeRequest(const Options& o, const std::string& bytes) {
  inference::ModelInferRequest r;
  r.set_model_name("scale");
  auto* x = r.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(o.shape);
  r.add_raw_input_contents(bytes);
  (*r.mutable_parameters())["factor"].set_double_param(2.0);
  if (!o.backend.empty()) (*r.mutable_parameters())["kerneld.backend"].set_string_param(o.backend);
  return r;
}

// One client's call, returning its status; `check` also compares the answer
// with 2x (the first call of each client).
struct Caller {
  virtual ~Caller() = default;
  virtual grpc::Status Call(bool check) = 0;
};

class V1Caller : public Caller {
 public:
  V1Caller(std::shared_ptr<grpc::Channel> ch, const v1::ExecuteRequest& req,
           const std::string& want)
      : stub_(v1::KernelService::NewStub(std::move(ch))), req_(req), want_(want) {}
  grpc::Status Call(bool check) override {
    grpc::ClientContext ctx;
    v1::ExecuteResponse resp;
    grpc::Status st = stub_->Execute(&ctx, req_, &resp);
    if (st.ok() && check) {
      auto it = resp.outputs().find("y");
      if (it == resp.outputs().end() || it->second.inline_data() != want_)
        return {grpc::StatusCode::INTERNAL, "kerneld.v1 answered other bytes than 2x"};
    }
    return st;
  }

 private:
  std::unique_ptr<v1::KernelService::Stub> stub_;
  const v1::ExecuteRequest& req_;
  const std::string& want_;
};

class KServeCaller : public Caller {
 public:
  KServeCaller(std::shared_ptr<grpc::Channel> ch, const inference::ModelInferRequest& req,
               const std::string& want)
      : stub_(inference::GRPCInferenceService::NewStub(std::move(ch))), req_(req), want_(want) {}
  grpc::Status Call(bool check) override {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    grpc::Status st = stub_->ModelInfer(&ctx, req_, &resp);
    if (st.ok() && check &&
        (resp.raw_output_contents_size() != 1 || resp.raw_output_contents(0) != want_))
      return {grpc::StatusCode::INTERNAL, "KServe answered other bytes than 2x"};
    return st;
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  const inference::ModelInferRequest& req_;
  const std::string& want_;
};

struct Level {
  double rps = 0;
  double p50 = 0;
  double p99 = 0;
};

// n clients for `seconds`, each on its own connection; every latency kept.
template <typename Make>
Level Run(int n, double seconds, Make make) {
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < n; ++i) callers.push_back(make(i));
  for (auto& c : callers) {  // connect, check the answer, warm the path
    for (int w = 0; w < 20; ++w) {
      grpc::Status st = c->Call(w == 0);
      if (!st.ok()) kb::Fail("warm-up", st);
    }
  }
  std::vector<std::vector<double>> lat(static_cast<size_t>(n));
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto& mine = lat[static_cast<size_t>(i)];
      mine.reserve(1 << 16);
      while (!stop.load(std::memory_order_relaxed)) {
        const auto s = std::chrono::steady_clock::now();
        grpc::Status st = callers[static_cast<size_t>(i)]->Call(false);
        if (!st.ok()) kb::Fail("call", st);
        mine.push_back(kb::UsSince(s));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the window, not a sync
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = kb::UsSince(t0) / 1e6;
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  const kb::Latency l = kb::Summarize(all);
  return {static_cast<double>(all.size()) / elapsed, l.p50, l.p99};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"KServe v2 ModelInfer against kerneld.v1 Execute on one daemon, one client program"};
  app.add_option("--target", o.target, "the daemon's address")->required();
  app.add_option("--shape", o.shape, "elements of x")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--clients", o.clients, "levels of concurrent clients")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "each window")->check(CLI::Range(0.1, 600.0));
  app.add_option("--rounds", o.rounds, "windows a front end and level")->check(CLI::Range(1, 50));
  app.add_option("--backend", o.backend, "the backend both front ends ask for");
  app.add_option("--json", o.json, "write the levels as JSON here");
  if (auto rc = kb::ParseFlags(app, argc, argv)) return *rc;

  const std::string bytes = kb::RandomFloats(o.shape, 7);
  std::string want(bytes.size(), '\0');
  for (size_t i = 0; i < bytes.size(); i += 4) {
    float f;
    std::memcpy(&f, bytes.data() + i, 4);
    f *= 2.0f;
    std::memcpy(want.data() + i, &f, 4);
  }
  const v1::ExecuteRequest vreq = V1Request(o, bytes);
  const inference::ModelInferRequest kreq = KServeRequest(o, bytes);

  std::printf("# scale, x float32 [%lld], factor 2, backend %s, %s, %.1f s windows, %d rounds\n",
              static_cast<long long>(o.shape),
              o.backend.empty() ? "(scheduler)" : o.backend.c_str(), o.target.c_str(), o.seconds,
              o.rounds);
  std::printf("%-8s %12s %10s %10s %12s %10s %10s %10s\n", "clients", "v1 req/s", "v1 p50",
              "v1 p99", "kserve/s", "ks p50", "ks p99", "p50 ratio");
  std::string json = "[";
  int conn = 0;
  for (int n : o.clients) {
    std::vector<double> vr, vp, vq, kr, kp, kq;
    for (int r = 0; r < o.rounds; ++r) {
      const Level v = Run(n, o.seconds, [&](int) {
        return std::make_unique<V1Caller>(Channel(o.target, conn++), vreq, want);
      });
      const Level k = Run(n, o.seconds, [&](int) {
        return std::make_unique<KServeCaller>(Channel(o.target, conn++), kreq, want);
      });
      vr.push_back(v.rps), vp.push_back(v.p50), vq.push_back(v.p99);
      kr.push_back(k.rps), kp.push_back(k.p50), kq.push_back(k.p99);
    }
    const double ratio = Median(kp) / Median(vp);
    std::printf("%-8d %12.0f %10.1f %10.1f %12.0f %10.1f %10.1f %10.2f\n", n, Median(vr),
                Median(vp), Median(vq), Median(kr), Median(kp), Median(kq), ratio);
    std::printf(
        "RESULT clients=%d v1_rps=%.0f v1_p50_us=%.1f kserve_rps=%.0f kserve_p50_us=%.1f "
        "p50_ratio=%.3f\n",
        n, Median(vr), Median(vp), Median(kr), Median(kp), ratio);
    char rec[256];
    std::snprintf(
        rec, sizeof(rec),
        "%s{\"clients\": %d, \"v1_rps\": %.0f, \"v1_p50_us\": %.1f, \"kserve_rps\": %.0f, "
        "\"kserve_p50_us\": %.1f, \"p50_ratio\": %.3f}",
        json.size() > 1 ? ", " : "", n, Median(vr), Median(vp), Median(kr), Median(kp), ratio);
    json += rec;
  }
  json += "]\n";
  if (!o.json.empty()) std::ofstream(o.json) << json;
  return 0;
}
