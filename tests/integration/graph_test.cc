// ExecuteGraph on the real daemon (CPU backend), through the real client
// library: a graph answers exactly the bytes of the same ops called one by
// one; intermediates are reused after their last reader; hostile graphs get
// a clear status and the daemon keeps serving (docs/graphs.md).
#include <fcntl.h>
#include <sys/mman.h>

#include <cstring>
#include <random>

#include "daemon_fixture.h"
#include "graph_builder.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::testing {
namespace {

using client::GraphBuilder;

// Random values of `dtype` (float32 or bfloat16) as a wire tensor.
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

v1::Tensor Inline(const v1::Tensor& out) {
  v1::Tensor t = out;  // a response's output is a request's input as is
  return t;
}

class GraphTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon({"--max_graph_steps=256"}); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static Daemon& d() { return *daemon_; }

  // One op through Execute; fails the test on an error.
  static v1::ExecuteResponse Call(const std::string& op,
                                  const std::map<std::string, v1::Tensor>& in,
                                  const std::map<std::string, double>& attrs = {}) {
    v1::ExecuteRequest req;
    req.set_op(op);
    for (const auto& [k, v] : in) (*req.mutable_inputs())[k] = v;
    for (const auto& [k, v] : attrs) (*req.mutable_attrs())[k].set_f(v);
    v1::ExecuteResponse resp;
    grpc::Status st = d().client().Execute(req, &resp);
    EXPECT_TRUE(st.ok()) << op << ": " << st.error_message();
    return resp;
  }

  static grpc::Status Run(const GraphBuilder& g, v1::ExecuteGraphResponse* resp) {
    return client::RunGraph(d().client(), g.request(), resp);
  }

  // A graph that must work: the daemon still serves after a hostile one.
  static void ExpectServing() {
    GraphBuilder g;
    auto x = g.Input("x", Random(v1::DTYPE_FLOAT32, {8}, 1));
    g.Step("scale", {{"x", x}}, {{"factor", 2.0}});
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.outputs().at("y").inline_data().size(), 32u);
  }

  static Daemon* daemon_;
};
Daemon* GraphTest::daemon_ = nullptr;

// fused_add_rmsnorm -> silu_and_mul -> scale -> add, against the same four
// Execute calls: the same bytes, for float32 and bfloat16.
TEST_F(GraphTest, MlpShapedChainEqualsOpsOneByOneBitForBit) {
  ASSERT_TRUE(d().ok()) << d().Log();
  for (v1::DType dt : {v1::DTYPE_FLOAT32, v1::DTYPE_BFLOAT16}) {
    SCOPED_TRACE(v1::DType_Name(dt));
    const int64_t T = 5, H = 96;
    const v1::Tensor x = Random(dt, {T, H}, 11), r = Random(dt, {T, H}, 12),
                     w = Random(dt, {H}, 13), z = Random(dt, {T, H / 2}, 14);

    GraphBuilder g;
    auto gx = g.Input("x", x), gr = g.Input("residual", r), gw = g.Input("w", w),
         gz = g.Input("z", z);
    auto norm = g.Step("fused_add_rmsnorm", {{"x", gx}, {"residual", gr}, {"weight", gw}},
                       {{"eps", 1e-5}}, "norm");
    auto act = g.Step("silu_and_mul", {{"x", norm}});
    auto scaled = g.Step("scale", {{"x", act}}, {{"factor", 0.75}});
    auto sum = g.Step("add", {{"a", scaled}, {"b", gz}});
    g.Output("y", sum);
    g.Output("residual", GraphBuilder::Out(norm, "residual"));
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.status().code(), 0);
    EXPECT_EQ(resp.info().device(), "cpu");

    v1::ExecuteResponse n =
        Call("fused_add_rmsnorm", {{"x", x}, {"residual", r}, {"weight", w}}, {{"eps", 1e-5}});
    v1::ExecuteResponse a = Call("silu_and_mul", {{"x", Inline(n.outputs().at("x"))}});
    v1::ExecuteResponse s = Call("scale", {{"x", Inline(a.outputs().at("y"))}}, {{"factor", 0.75}});
    v1::ExecuteResponse y = Call("add", {{"a", Inline(s.outputs().at("y"))}, {"b", z}});
    ASSERT_EQ(resp.outputs().size(), 2u);
    EXPECT_EQ(resp.outputs().at("y").shape_size(), 2);
    EXPECT_EQ(resp.outputs().at("y").shape(1), H / 2);
    EXPECT_TRUE(resp.outputs().at("y").inline_data() == y.outputs().at("y").inline_data());
    EXPECT_TRUE(resp.outputs().at("residual").inline_data() ==
                n.outputs().at("residual").inline_data());
    // The request's own bytes are never written: x went in place into a copy.
    EXPECT_TRUE(g.request().inputs().at("x").inline_data() == x.inline_data());
  }
}

// A chain of eight scales: each step may write over its input once nothing
// reads it later, so the intermediates take one block, not seven.
TEST_F(GraphTest, ChainReusesOneIntermediateBlock) {
  ASSERT_TRUE(d().ok()) << d().Log();
  const v1::Tensor x = Random(v1::DTYPE_FLOAT32, {1000}, 21);
  GraphBuilder g;
  GraphBuilder::Ref cur = g.Input("x", x);
  v1::Tensor expect = x;
  for (int i = 0; i < 8; ++i) {
    const double f = 0.5 + 0.125 * i;
    cur = g.Step("scale", {{"x", cur}}, {{"factor", f}});
    expect = Inline(Call("scale", {{"x", expect}}, {{"factor", f}}).outputs().at("y"));
  }
  v1::ExecuteGraphResponse resp;
  grpc::Status st = Run(g, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.intermediate_bytes(), 4096);  // 4000 bytes, one 256-aligned block
  EXPECT_TRUE(resp.outputs().at("y").inline_data() == expect.inline_data());
}

TEST_F(GraphTest, ReferencesToLaterStepsOrUnknownNamesAreRefused) {
  ASSERT_TRUE(d().ok()) << d().Log();
  const v1::Tensor x = Random(v1::DTYPE_FLOAT32, {4}, 31);
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, std::string>> steps;  // name, input binding
    const char* expect;
  } cases[] = {
      {"a cycle by name",
       {{"a", "b"}, {"b", "a"}},
       "graph step 0 (scale): input 'x' refers to 'b'"},
      {"itself", {{"a", "a"}}, "itself"},
      {"a later index", {{"", "step1"}, {"", "x"}}, "which comes later"},
      {"an unknown name", {{"", "nope"}}, "neither a graph input nor a step"},
      {"an unknown output", {{"", "x"}, {"", "step0.z"}}, "has no output 'z'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    GraphBuilder g;
    g.Input("x", x);
    for (const auto& [name, ref] : c.steps)
      g.Step("scale", {{"x", GraphBuilder::Ref{ref}}}, {{"factor", 2.0}}, name);
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(c.expect), std::string::npos) << st.error_message();
  }
  ExpectServing();
}

TEST_F(GraphTest, HostileGraphsGetAClearStatusAndTheDaemonServes) {
  ASSERT_TRUE(d().ok()) << d().Log();
  const v1::Tensor x = Random(v1::DTYPE_FLOAT32, {4}, 41);
  {  // 10,000 steps (300 under ThreadSanitizer: kThreadSanitized)
    const int steps = kThreadSanitized ? 300 : 10000;
    GraphBuilder g;
    auto cur = g.Input("x", x);
    for (int i = 0; i < steps; ++i) cur = g.Step("scale", {{"x", cur}}, {{"factor", 1.0}});
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(
        st.error_message().find(std::to_string(steps) + " steps; at most 256 (--max_graph_steps)"),
        std::string::npos)
        << st.error_message();
  }
  {  // an unknown op, named with its step
    GraphBuilder g;
    auto cur = g.Input("x", x);
    cur = g.Step("scale", {{"x", cur}}, {{"factor", 1.0}});
    g.Step("no_such_op", {{"x", cur}});
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
    EXPECT_NE(st.error_message().find("graph step 1 (no_such_op): unknown op"), std::string::npos)
        << st.error_message();
  }
  {  // a shape that does not follow through the steps: named step, tensor, reason
    GraphBuilder g;
    auto a = g.Input("a", x);
    auto b = g.Input("b", Random(v1::DTYPE_FLOAT32, {8}, 42));
    auto s = g.Step("scale", {{"x", a}}, {{"factor", 1.0}});
    g.Step("add", {{"a", s}, {"b", b}});
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("graph step 1 (add): add: 'b' has shape [8]"),
              std::string::npos)
        << st.error_message();
  }
  {  // a step whose output is 2^40 bytes: refused before anything is allocated
    GraphBuilder g;
    const int64_t n = int64_t{1} << 19;
    auto a = g.Input("a", Random(v1::DTYPE_FLOAT32, {n, 1}, 43));
    auto b = g.Input("b", Random(v1::DTYPE_FLOAT32, {1, n}, 44));
    auto c = g.Step("gemm", {{"a", a}, {"b", b}});
    auto y = g.Step("scale", {{"x", c}}, {{"factor", 2.0}});
    g.Output("y", y, "buf-unused");
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_NE(
        st.error_message().find("graph step 0 (gemm) output 'c' float32 [524288, 524288] (1 TiB)"),
        std::string::npos)
        << st.error_message();
    EXPECT_NE(st.error_message().find("--max_inflight_mb"), std::string::npos);
  }
  {  // the same, returned inline: beyond one response
    GraphBuilder g;
    const int64_t n = int64_t{1} << 19;
    auto a = g.Input("a", Random(v1::DTYPE_FLOAT32, {n, 1}, 43));
    auto b = g.Input("b", Random(v1::DTYPE_FLOAT32, {1, n}, 44));
    g.Step("gemm", {{"a", a}, {"b", b}});
    v1::ExecuteGraphResponse resp;
    grpc::Status st = Run(g, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_NE(st.error_message().find("--max_message_mb"), std::string::npos);
  }
  ExpectServing();
}

// A buffer of another principal (here: another anonymous connection)
// answers exactly like an id that never existed.
TEST_F(GraphTest, AnotherPrincipalsBufferAnswersLikeAnUnknownId) {
  ASSERT_TRUE(d().ok()) << d().Log();
  const std::string shm = "/kerneld-graph-" + std::to_string(getpid());
  shm_unlink(shm.c_str());
  const int fd = shm_open(shm.c_str(), O_CREAT | O_EXCL | O_RDWR, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  fchmod(fd, 0666);
  close(fd);
  auto connection = [&](int n) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("kerneld.test.connection", n);
    return grpc::CreateCustomChannel(d().target(), grpc::InsecureChannelCredentials(), args);
  };
  auto owner = connection(1), other = connection(2);
  std::string id;
  {
    auto stub = v1::BufferService::NewStub(owner);
    grpc::ClientContext ctx;
    v1::RegisterSharedMemoryRequest req;
    req.set_shm_name(shm);
    req.set_byte_size(4096);
    v1::RegisterSharedMemoryResponse resp;
    ASSERT_TRUE(stub->RegisterSharedMemory(&ctx, req, &resp).ok());
    id = resp.buffer_id();
  }
  auto run = [&](const std::shared_ptr<grpc::Channel>& ch, const std::string& buffer) {
    GraphBuilder g;
    auto x = g.Input("x", v1::DTYPE_FLOAT32, {16}, buffer);
    g.Step("scale", {{"x", x}}, {{"factor", 2.0}});
    client::KernelClient c(ch);
    v1::ExecuteGraphResponse resp;
    return client::RunGraph(c, g.request(), &resp);
  };
  EXPECT_TRUE(run(owner, id).ok());
  const std::string ghost = "buf-999999-deadbeef";
  const grpc::Status theirs = run(other, id), unknown = run(other, ghost);
  EXPECT_EQ(theirs.error_code(), grpc::StatusCode::NOT_FOUND) << theirs.error_message();
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();
  std::string a = theirs.error_message(), b = unknown.error_message();
  for (auto* s : {&a, &b})
    for (const std::string& what : {id, ghost})
      for (size_t at; (at = s->find(what)) != std::string::npos;) s->replace(at, what.size(), "ID");
  EXPECT_EQ(a, b);
  shm_unlink(shm.c_str());
  ExpectServing();
}

// The replay series are exposed on every daemon; the CPU backend runs each
// graph step by step, so a repeated graph neither captures nor replays.
TEST_F(GraphTest, ReplaySeriesAreExposedAndStayZeroOnTheCpu) {
  ASSERT_TRUE(d().ok()) << d().Log();
  for (int i = 0; i < 3; ++i) ExpectServing();
  const std::string text = d().Metrics();
  for (const char* series : {"kerneld_graph_replay_hits_total 0", "kerneld_graph_captures_total 0",
                             "kerneld_graph_updates_total 0", "kerneld_graph_uncapturable_total 0",
                             "kerneld_graph_cache_entries 0"})
    EXPECT_NE(text.find(std::string("\n") + series + "\n"), std::string::npos) << series << " in\n"
                                                                               << text;
}

}  // namespace
}  // namespace kerneld::testing
