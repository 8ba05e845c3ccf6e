// The nvrtc backend through the daemon on a GPU (docs/jit.md): every op with
// a JIT form, asked for backend "nvrtc", against its float64 reference, over
// widths with tails (the scalar path), few and many rows (each launch plan)
// and rows too wide for the register cache; a second daemon on the same
// cache directory compiles nothing; --jit=async serves the first request on
// the AOT kernel and later ones on the JIT kernel; WarmJit loads a kernel
// before its first request. Exits 77 (skipped) without a GPU.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include "daemon_fixture.h"
#include "gpu_util.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "reference.h"

namespace kerneld::testing {
namespace {

// Each input's shape for `rows` rows of width `h`.
std::map<std::string, Shape> Inputs(const std::string& op, int64_t rows, int64_t h) {
  if (op == "rmsnorm") return {{"x", {rows, h}}, {"weight", {h}}};
  if (op == "fused_add_rmsnorm")
    return {{"x", {rows, h}}, {"residual", {rows, h}}, {"weight", {h}}};
  if (op == "layernorm") return {{"x", {rows, h}}, {"gamma", {h}}, {"beta", {h}}};
  if (op == "softmax") return {{"logits", {rows, h}}};
  if (op == "rope") {
    // rows tokens; head_dim from h (odd widths: the scalar path), 64 positions.
    const int64_t head = h % 2 == 0 ? std::min<int64_t>(h, 256) : std::min<int64_t>(h, 255) + 1;
    return {{"q", {rows, 4, head}},
            {"k", {rows, 2, head}},
            {"positions", {rows}},
            {"cos_sin_cache", {64, head}}};
  }
  return {{"x", {rows, 2 * h}}};  // the gated activations
}

// An input's values: positions index the cache; the cache is float32.
client::HostTensor RandomInput(const std::string& name, DType dt, const Shape& shape,
                               std::mt19937_64& rng) {
  if (name == "positions") return client::Random(DType::kInt64, shape, rng, 0, 64);
  if (name == "cos_sin_cache") return client::Random(DType::kFloat32, shape, rng, -1, 1);
  return client::Random(dt, shape, rng, -2, 2);
}

const std::vector<std::string>& JitOps() {
  static const std::vector<std::string> ops = {
      "rmsnorm",      "fused_add_rmsnorm", "layernorm", "silu_and_mul",
      "gelu_and_mul", "gelu_tanh_and_mul", "softmax",   "rope"};
  return ops;
}

// (rows, width): tails (1, 127, 4097: the scalar path), the lab plans of
// rmsnorm (16 x 4096, 64 x 8192, 600 x 8192), rows past the register cache
// (32768, 40000), the norms' split rows on sm_90+ (16 x 16384, 1 x 32768,
// 64 x 32767 with a tail).
const std::vector<std::pair<int64_t, int64_t>>& Sizes() {
  static const std::vector<std::pair<int64_t, int64_t>> s = {
      {1, 1},      {3, 127},   {5, 128},   {2, 4097},   {16, 4096}, {64, 8192},
      {600, 8192}, {2, 32768}, {1, 40000}, {16, 16384}, {1, 32768}, {64, 32767}};
  return s;
}

std::string Cache() {
  char tmpl[] = "/tmp/kerneld-jit-gpu-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return std::string(d ? d : "/tmp") + "/jit";
}

double HalfTolerance(const std::string& op) {
  if (op == "fused_add_rmsnorm") return 2e-2;
  if (op == "rmsnorm" || op == "layernorm") return 1e-2;
  return -1;
}

// Runs every op x dtype x size on `backend`; returns the cases checked.
int CheckAll(Daemon& d, const std::string& backend) {
  std::mt19937_64 rng(11);
  int checked = 0;
  for (const std::string& op : JitOps()) {
    for (DType dt : FloatTypes()) {
      for (auto [rows, h] : Sizes()) {
        v1::ExecuteRequest req;
        req.set_op(op);
        req.set_backend(backend);
        HostTensors in;
        for (const auto& [name, shape] : Inputs(op, rows, h)) {
          in[name] = RandomInput(name, dt, shape, rng);
          client::ToProto(in[name], &(*req.mutable_inputs())[name]);
        }
        AttrMap attrs;
        HostTensors want;
        std::string error;
        EXPECT_TRUE(Reference(op, in, attrs, &want, &error)) << op << ": " << error;
        v1::ExecuteResponse resp;
        grpc::Status st = d.client().Execute(req, &resp);
        const std::string what = op + " " + std::string(DTypeName(dt)) + " " +
                                 std::to_string(rows) + "x" + std::to_string(h);
        EXPECT_TRUE(st.ok()) << what << ": " << st.error_message();
        if (!st.ok()) continue;
        EXPECT_EQ(resp.info().backend(), backend) << what;
        for (const auto& [name, w] : want) {
          client::HostTensor got;
          if (!client::FromProto(resp.outputs().at(name), &got)) {
            ADD_FAILURE() << what << " " << name << ": the output does not decode";
            continue;
          }
          double rtol, atol;
          client::Tolerance(dt, &rtol, &atol);
          if (HalfTolerance(op) > 0 && dt != DType::kFloat32) rtol = atol = HalfTolerance(op);
          auto cmp = client::Compare(got.values, w.values, rtol, atol);
          EXPECT_EQ(cmp.mismatches, 0) << what << " output " << name << ": max abs err "
                                       << cmp.max_abs_err << " first bad " << cmp.first_bad;
        }
        ++checked;
      }
    }
  }
  return checked;
}

double Series(const Daemon& d, const char* name) {
  return SeriesValue(d.Metrics(), name, {}).value_or(-1);
}

v1::ListJitCacheResponse ListJit(Daemon& d) {
  auto stub = v1::JitService::NewStub(d.client().channel());
  grpc::ClientContext ctx;
  v1::ListJitCacheResponse resp;
  EXPECT_TRUE(stub->ListJitCache(&ctx, v1::ListJitCacheRequest(), &resp).ok());
  return resp;
}

// Polls ListJitCache until every kernel the daemon has seen is ready (a
// condition on the daemon's state, bounded at 120 s).
bool WaitAllReady(Daemon& d) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto list = ListJit(d);
    bool all = list.kernels_size() > 0;
    for (const auto& k : list.kernels()) {
      if (k.state() == "failed") {
        ADD_FAILURE() << k.kernel() << ": " << k.error();
        return false;
      }
      all = all && k.state() == "ready";
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(JitDaemonGpu, EveryJitOpMatchesTheReferenceThenTheCacheServesASecondDaemon) {
  const std::string cache = Cache();
  int kernels = 0;
  {
    Daemon d({"--jit=sync", "--jit_cache_dir=" + cache});
    ASSERT_TRUE(d.ok()) << d.Log();
    const auto list = ListJit(d);
    ASSERT_EQ(list.status(), "") << "the nvrtc backend does not serve: " << list.status();
    EXPECT_GT(CheckAll(d, "nvrtc"), 0);
    kernels = ListJit(d).kernels_size();
    EXPECT_GT(kernels, 0);
    EXPECT_EQ(Series(d, "kerneld_jit_cache_misses_total"), kernels);
    EXPECT_EQ(Series(d, "kerneld_jit_compiles_total"), kernels);
    EXPECT_EQ(Series(d, "kerneld_jit_cache_entries"), kernels);
    // Each compile logs its kernel, arch and time ("jit_compile" is the
    // event's name in JSON lines; the text line reads as below).
    EXPECT_NE(d.Log().find("kerneld: compiled "), std::string::npos) << d.Log();
    EXPECT_NE(d.Log().find(" for sm_"), std::string::npos);
  }
  Daemon again({"--jit=sync", "--jit_cache_dir=" + cache});
  ASSERT_TRUE(again.ok()) << again.Log();
  EXPECT_GT(CheckAll(again, "nvrtc"), 0);
  EXPECT_EQ(Series(again, "kerneld_jit_cache_misses_total"), 0) << "a kernel was compiled again";
  EXPECT_EQ(Series(again, "kerneld_jit_cache_hits_total"), kernels);
  EXPECT_EQ(Series(again, "kerneld_jit_compiles_total"), 0);
}

TEST(JitDaemonGpu, AsyncServesOnAotWhileCompilingThenOnJit) {
  Daemon d({"--jit=async", "--jit_cache_dir=" + Cache()});
  ASSERT_TRUE(d.ok()) << d.Log();
  std::mt19937_64 rng(2);
  v1::ExecuteRequest req;
  req.set_op("rmsnorm");
  client::ToProto(client::Random(DType::kBFloat16, {16, 4096}, rng), &(*req.mutable_inputs())["x"]);
  client::ToProto(client::Random(DType::kBFloat16, {4096}, rng),
                  &(*req.mutable_inputs())["weight"]);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(d.client().Execute(req, &resp).ok());
  EXPECT_EQ(resp.info().backend(), "cuda") << "the first request never waits for a compile";
  ASSERT_TRUE(WaitAllReady(d)) << d.Log();
  ASSERT_TRUE(d.client().Execute(req, &resp).ok());
  EXPECT_EQ(resp.info().backend(), "nvrtc");
}

TEST(JitDaemonGpu, WarmLoadsBeforeTheFirstRequest) {
  Daemon d({"--jit=async", "--jit_cache_dir=" + Cache()});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto stub = v1::JitService::NewStub(d.client().channel());
  grpc::ClientContext ctx;
  v1::WarmJitRequest wreq;
  wreq.set_op("silu_and_mul");
  wreq.set_dtype("float16");
  wreq.add_shape(16);
  wreq.add_shape(2 * 14336);
  v1::WarmJitResponse wresp;
  grpc::Status st = stub->WarmJit(&ctx, wreq, &wresp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_GE(wresp.kernels_size(), 1);
  EXPECT_GE(wresp.kernels(0).devices_loaded(), 1);
  std::mt19937_64 rng(4);
  v1::ExecuteRequest req;
  req.set_op("silu_and_mul");
  client::ToProto(client::Random(DType::kFloat16, {16, 2 * 14336}, rng),
                  &(*req.mutable_inputs())["x"]);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(d.client().Execute(req, &resp).ok());
  EXPECT_EQ(resp.info().backend(), "nvrtc");
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
