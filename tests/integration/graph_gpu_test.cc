// ExecuteGraph on a GPU through the real daemon: a graph answers exactly
// the bytes of the same ops called one by one on cuda:0, on its first call
// (captured) and on later ones (replayed as a CUDA graph, seen in the
// kerneld_graph_* metrics); new attr values update the cached graph and stay
// correct; a buffer unregistered between calls is never replayed into
// (docs/graphs.md, "Replay"). The daemon runs one CUDA stream and no inline
// runs, so every call meets the same per-stream cache.
#include <cstring>
#include <random>
#include <sstream>

#include "daemon_fixture.h"
#include "gpu_util.h"
#include "graph_builder.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::testing {
namespace {

using client::GraphBuilder;

v1::Tensor Random(v1::DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  v1::Tensor t;
  t.set_dtype(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    t.add_shape(d);
    n *= d;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::string* bytes = t.mutable_inline_data();
  for (int64_t i = 0; i < n; ++i) {
    const float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (dtype == v1::DTYPE_BFLOAT16) {
      const uint16_t h = static_cast<uint16_t>(bits >> 16);
      bytes->append(reinterpret_cast<const char*>(&h), 2);
    } else {
      bytes->append(reinterpret_cast<const char*>(&bits), 4);
    }
  }
  return t;
}

class GraphGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({"--cuda_streams=1", "--inline_max_kb=-1", "--graph_cache_entries=8"});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon& d() { return *daemon_; }

  static v1::ExecuteResponse Call(const std::string& op,
                                  const std::map<std::string, v1::Tensor>& in,
                                  const std::map<std::string, double>& attrs = {}) {
    v1::ExecuteRequest req;
    req.set_op(op);
    req.set_device("cuda:0");
    for (const auto& [k, v] : in) (*req.mutable_inputs())[k] = v;
    for (const auto& [k, v] : attrs) (*req.mutable_attrs())[k].set_f(v);
    v1::ExecuteResponse resp;
    grpc::Status st = d().client().Execute(req, &resp);
    EXPECT_TRUE(st.ok()) << op << ": " << st.error_message();
    EXPECT_EQ(resp.info().device(), "cuda:0");
    return resp;
  }

  static grpc::Status Run(GraphBuilder& g, v1::ExecuteGraphResponse* resp) {
    g.SetDevice("cuda:0");
    return client::RunGraph(d().client(), g.request(), resp);
  }

  // The value of an unlabelled series in the daemon's exposition.
  static double Metric(const std::string& name) {
    std::istringstream in(d().Metrics());
    for (std::string line; std::getline(in, line);)
      if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    ADD_FAILURE() << "no series " << name;
    return -1;
  }

  // Every kerneld_graph_* line, for failure messages.
  static std::string Series() {
    std::istringstream in(d().Metrics());
    std::string out;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("kerneld_graph_", 0) == 0) out += line + "\n";
    return out;
  }

  static std::string Allocate(uint64_t bytes) {
    auto stub = v1::BufferService::NewStub(d().client().channel());
    grpc::ClientContext ctx;
    v1::AllocateBufferRequest req;
    req.set_device("cuda:0");
    req.set_byte_size(bytes);
    v1::AllocateBufferResponse resp;
    grpc::Status st = stub->AllocateBuffer(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.buffer_id();
  }
  static void Unregister(const std::string& id) {
    auto stub = v1::BufferService::NewStub(d().client().channel());
    grpc::ClientContext ctx;
    v1::UnregisterBufferRequest req;
    req.set_buffer_id(id);
    v1::UnregisterBufferResponse resp;
    grpc::Status st = stub->UnregisterBuffer(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  // Writes `t` into buffer `id` on the GPU (a one-step graph: scale by 1 is
  // exact), and reads it back the same way.
  static void Fill(const std::string& id, const v1::Tensor& t) {
    GraphBuilder g;
    auto x = g.Input("x", t);
    g.Output("y", g.Step("scale", {{"x", x}}, {{"factor", 1.0}}), id);
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  static std::string Read(const std::string& id, v1::DType dt, std::vector<int64_t> shape) {
    GraphBuilder g;
    auto x = g.Input("x", dt, shape, id);
    g.Output("y", g.Step("scale", {{"x", x}}, {{"factor", 1.0}}));
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return st.ok() ? resp.outputs().at("y").inline_data() : "";
  }

  static Daemon* daemon_;
};
Daemon* GraphGpuTest::daemon_ = nullptr;

// fused_add_rmsnorm -> silu_and_mul -> scale -> add on cuda:0 against the
// same four Execute calls there, bit for bit, three times: the first call
// captures, the next two replay.
TEST_F(GraphGpuTest, ChainEqualsOpsOneByOneBitForBitCapturedAndReplayed) {
  ASSERT_TRUE(d().ok()) << d().Log();
  for (v1::DType dt : {v1::DTYPE_FLOAT32, v1::DTYPE_BFLOAT16}) {
    SCOPED_TRACE(v1::DType_Name(dt));
    const int64_t T = 16, H = 4096;
    const v1::Tensor x = Random(dt, {T, H}, 11), r = Random(dt, {T, H}, 12),
                     w = Random(dt, {H}, 13), z = Random(dt, {T, H / 2}, 14);
    v1::ExecuteResponse n =
        Call("fused_add_rmsnorm", {{"x", x}, {"residual", r}, {"weight", w}}, {{"eps", 1e-5}});
    v1::ExecuteResponse a = Call("silu_and_mul", {{"x", n.outputs().at("x")}});
    v1::ExecuteResponse s = Call("scale", {{"x", a.outputs().at("y")}}, {{"factor", 0.75}});
    v1::ExecuteResponse y = Call("add", {{"a", s.outputs().at("y")}, {"b", z}});

    const double hits0 = Metric("kerneld_graph_replay_hits_total"),
                 captures0 = Metric("kerneld_graph_captures_total");
    for (int call = 0; call < 3; ++call) {
      SCOPED_TRACE("call " + std::to_string(call));
      GraphBuilder g;
      auto gx = g.Input("x", x), gr = g.Input("residual", r), gw = g.Input("w", w),
           gz = g.Input("z", z);
      auto norm = g.Step("fused_add_rmsnorm", {{"x", gx}, {"residual", gr}, {"weight", gw}},
                         {{"eps", 1e-5}}, "norm");
      auto act = g.Step("silu_and_mul", {{"x", norm}});
      auto scaled = g.Step("scale", {{"x", act}}, {{"factor", 0.75}});
      g.Output("y", g.Step("add", {{"a", scaled}, {"b", gz}}));
      g.Output("residual", GraphBuilder::Out(norm, "residual"));
      v1::ExecuteGraphResponse resp;
      grpc::Status st = Run(g, &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
      EXPECT_EQ(resp.info().device(), "cuda:0");
      EXPECT_TRUE(resp.outputs().at("y").inline_data() == y.outputs().at("y").inline_data());
      EXPECT_TRUE(resp.outputs().at("residual").inline_data() ==
                  n.outputs().at("residual").inline_data());
    }
    EXPECT_EQ(Metric("kerneld_graph_captures_total"), captures0 + 1) << Series();
    EXPECT_EQ(Metric("kerneld_graph_replay_hits_total"), hits0 + 2) << Series();
    EXPECT_GE(Metric("kerneld_graph_cache_entries"), 1) << Series();
  }
}

// A chain of scales whose factors change between calls: the key leaves attr
// values out, so the cached graph is updated (no new capture) and every
// answer is the new factors' one.
TEST_F(GraphGpuTest, NewAttrValuesUpdateTheCachedGraphAndStayCorrect) {
  ASSERT_TRUE(d().ok()) << d().Log();
  const v1::Tensor x = Random(v1::DTYPE_FLOAT32, {4096}, 21);
  const double captures0 = Metric("kerneld_graph_captures_total");
  for (double base : {0.5, 0.5, 1.25, 3.0}) {
    SCOPED_TRACE(base);
    GraphBuilder g;
    GraphBuilder::Ref cur = g.Input("x", x);
    v1::Tensor expect = x;
    for (int i = 0; i < 4; ++i) {
      const double f = base + 0.125 * i;
      cur = g.Step("scale", {{"x", cur}}, {{"factor", f}});
      expect = Call("scale", {{"x", expect}}, {{"factor", f}}).outputs().at("y");
    }
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(resp.outputs().at("y").inline_data() == expect.inline_data());
  }
  // One capture; the changes were updates (or, where the driver refused an
  // update, fresh instantiations: at most one per change).
  const double captures = Metric("kerneld_graph_captures_total") - captures0;
  EXPECT_GE(captures, 1) << Series();
  EXPECT_GE(Metric("kerneld_graph_updates_total") + captures, 3) << Series();
}

// A graph reading buffer A and writing buffer O is captured and replayed;
// then both are unregistered and new ones allocated (the pool likely hands
// back the same addresses). The next call must not replay the old entry:
// it reads the new input and writes the new output, and the old ids are
// refused.
TEST_F(GraphGpuTest, UnregisteredBuffersAreNeverReplayedInto) {
  ASSERT_TRUE(d().ok()) << d().Log();
  const int64_t n = 8192;
  const v1::Tensor x1 = Random(v1::DTYPE_FLOAT32, {n}, 31), x2 = Random(v1::DTYPE_FLOAT32, {n}, 32);
  auto run = [&](const std::string& in, const std::string& out) {
    GraphBuilder g;
    auto x = g.Input("x", v1::DTYPE_FLOAT32, {n}, in);
    auto s = g.Step("scale", {{"x", x}}, {{"factor", 2.0}});
    g.Output("y", g.Step("scale", {{"x", s}}, {{"factor", -0.5}}), out);
    v1::ExecuteGraphResponse resp;
    return Run(g, &resp);
  };
  auto expect_of = [&](const v1::Tensor& x) {
    v1::Tensor t = Call("scale", {{"x", x}}, {{"factor", 2.0}}).outputs().at("y");
    return Call("scale", {{"x", t}}, {{"factor", -0.5}}).outputs().at("y").inline_data();
  };

  std::string a = Allocate(n * 4), o = Allocate(n * 4);
  Fill(a, x1);
  const double hits0 = Metric("kerneld_graph_replay_hits_total");
  ASSERT_TRUE(run(a, o).ok());
  ASSERT_TRUE(run(a, o).ok());
  EXPECT_EQ(Metric("kerneld_graph_replay_hits_total"), hits0 + 1) << Series();
  EXPECT_TRUE(Read(o, v1::DTYPE_FLOAT32, {n}) == expect_of(x1));

  Unregister(a);
  Unregister(o);
  EXPECT_EQ(run(a, o).error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string a2 = Allocate(n * 4), o2 = Allocate(n * 4);
  Fill(a2, x2);
  Fill(o2, Random(v1::DTYPE_FLOAT32, {n}, 33));  // not what the graph will write
  const double captures0 = Metric("kerneld_graph_captures_total");
  const double hits1 = Metric("kerneld_graph_replay_hits_total");
  ASSERT_TRUE(run(a2, o2).ok());
  EXPECT_EQ(Metric("kerneld_graph_captures_total"), captures0 + 1) << Series();
  EXPECT_EQ(Metric("kerneld_graph_replay_hits_total"), hits1) << Series();
  EXPECT_TRUE(Read(o2, v1::DTYPE_FLOAT32, {n}) == expect_of(x2));
  Unregister(a2);
  Unregister(o2);
}

// --graph_cache_entries bounds the cache: ten structures through a cache of
// eight leave eight entries.
TEST_F(GraphGpuTest, TheCacheIsBounded) {
  ASSERT_TRUE(d().ok()) << d().Log();
  for (int len = 1; len <= 10; ++len) {
    GraphBuilder g;
    GraphBuilder::Ref cur = g.Input("x", Random(v1::DTYPE_FLOAT32, {256}, 41));
    for (int i = 0; i < len; ++i) cur = g.Step("scale", {{"x", cur}}, {{"factor", 1.5}});
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(Metric("kerneld_graph_cache_entries"), 8) << Series();
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
