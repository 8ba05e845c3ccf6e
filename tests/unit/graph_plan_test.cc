// The graph planner without a server: validation errors, inference across
// steps, storage (in place where the schema allows, copies where not) and
// the arena's reuse of blocks after their last reader (server/graph/).
#include "graph/graph_plan.h"

#include <gtest/gtest.h>

#include "graph/graph_memory.h"
#include "graph/graph_replay_key.h"
#include "kerneld/registry.h"

namespace kerneld::server {
namespace {

v1::Tensor Header(v1::DType dt, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(dt);
  int64_t n = 4;
  for (int64_t d : shape) {
    t.add_shape(d);
    n *= d;
  }
  t.mutable_inline_data()->resize(static_cast<size_t>(n));
  return t;
}

v1::GraphStep* Step(v1::ExecuteGraphRequest* r, const std::string& op,
                    std::map<std::string, std::string> in, const std::string& name = "") {
  v1::GraphStep* s = r->add_steps();
  s->set_op(op);
  s->set_name(name);
  for (auto& [k, v] : in) (*s->mutable_inputs())[k] = v;
  return s;
}

TEST(GraphArena, BlocksShareBytesOnlyWhenTheirLivesDoNotOverlap) {
  std::vector<GraphArenaBlock> b = {
      {1000, 0, 1, 0}, {1000, 1, 2, 0}, {1000, 2, 3, 0}, {5000, 3, 3, 0}};
  const int64_t total = PlanArena(&b);
  EXPECT_EQ(b[0].offset, 0);
  EXPECT_EQ(b[1].offset, 1024);  // lives with block 0 at step 1
  EXPECT_EQ(b[2].offset, 0);     // block 0 died after step 1
  EXPECT_EQ(b[3].offset, 1024 + 1024 > 5000 ? 2048 : 1024);
  EXPECT_EQ(total, b[3].offset + 5120);
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const bool live_together = !(b[i].last < b[j].first || b[j].last < b[i].first);
      const bool overlap =
          b[i].offset < b[j].offset + b[j].bytes && b[j].offset < b[i].offset + b[i].bytes;
      EXPECT_FALSE(live_together && overlap) << i << " and " << j;
    }
}

TEST(GraphPlan, InfersThroughStepsAndReusesInPlace) {
  v1::ExecuteGraphRequest r;
  (*r.mutable_inputs())["x"] = Header(v1::DTYPE_FLOAT32, {4, 64});
  (*r.mutable_inputs())["w"] = Header(v1::DTYPE_FLOAT32, {64});
  Step(&r, "rmsnorm", {{"x", "x"}, {"weight", "w"}}, "norm");
  Step(&r, "silu_and_mul", {{"x", "norm"}});
  Step(&r, "scale", {{"x", "step1.y"}})->mutable_attrs()->operator[]("factor").set_f(2);
  GraphPlan p;
  ASSERT_TRUE(BuildGraphPlan(r, {}, &p).ok());
  ASSERT_EQ(p.outputs.size(), 1u);
  const GraphValue& y = p.values[static_cast<size_t>(p.outputs[0].value)];
  EXPECT_EQ(y.shape, (Shape{4, 32}));
  EXPECT_EQ(y.storage.kind, GraphStorage::Kind::kOutput);
  // rmsnorm's y is read once by silu_and_mul, whose y may not alias: two
  // blocks live at step 1; scale is the output. Block 0 dies after step 1.
  EXPECT_EQ(p.blocks.size(), 2u);
  EXPECT_EQ(p.arena_bytes, 4 * 64 * 4 + 4 * 32 * 4);
  EXPECT_EQ(p.intermediate_bytes, 4 * 64 * 4 + 4 * 32 * 4);
}

TEST(GraphPlan, InPlaceOverAGraphInputCopiesIt) {
  v1::ExecuteGraphRequest r;
  (*r.mutable_inputs())["x"] = Header(v1::DTYPE_FLOAT32, {2, 8});
  (*r.mutable_inputs())["r"] = Header(v1::DTYPE_FLOAT32, {2, 8});
  (*r.mutable_inputs())["w"] = Header(v1::DTYPE_FLOAT32, {8});
  Step(&r, "fused_add_rmsnorm", {{"x", "x"}, {"residual", "r"}, {"weight", "w"}});
  Step(&r, "add", {{"a", "step0.x"}, {"b", "x"}});  // x is read again: never written
  GraphPlan p;
  ASSERT_TRUE(BuildGraphPlan(r, {}, &p).ok());
  const GraphStepPlan& s0 = p.steps[0];
  ASSERT_EQ(s0.copies.size(), 2u);  // both in-place outputs start as copies of the inputs
  EXPECT_EQ(s0.read_from[0], s0.outputs[0]);
  EXPECT_EQ(s0.read_from[1], s0.outputs[1]);
  EXPECT_EQ(p.values[0].storage.kind, GraphStorage::Kind::kInput);
}

TEST(GraphPlan, RefusalsNameTheStepTheTensorAndTheReason) {
  struct Case {
    std::function<void(v1::ExecuteGraphRequest*)> make;
    StatusCode code;
    std::string text;
  } cases[] = {
      {[](auto*) {}, StatusCode::kInvalidArgument, "no steps"},
      {[](auto* r) {
         Step(r, "scale", {{"x", "x"}});
       },
       StatusCode::kInvalidArgument, "graph step 0 (scale): scale: missing required attr 'factor'"},
      {[](auto* r) { Step(r, "nope", {}); }, StatusCode::kNotFound,
       "graph step 0 (nope): unknown op"},
      {[](auto* r) {
         Step(r, "silu_and_mul", {{"y", "x"}});
       },
       StatusCode::kInvalidArgument, "unknown input 'y'"},
      {[](auto* r) {
         Step(r, "silu_and_mul", {{"x", "q.y"}});
       },
       StatusCode::kInvalidArgument, "neither a graph input nor a step"},
      {[](auto* r) {
         Step(r, "silu_and_mul", {{"x", "x"}}, "x");
       },
       StatusCode::kInvalidArgument, "also a graph input's"},
      {[](auto* r) {
         Step(r, "silu_and_mul", {{"x", "x"}}, "step3");
       },
       StatusCode::kInvalidArgument, "is step 3's index name"},
      {[](auto* r) {
         Step(r, "silu_and_mul", {{"x", "x"}});
         v1::GraphOutput* o = r->add_outputs();
         o->set_name("y");
         o->set_source("x");
       },
       StatusCode::kInvalidArgument, "is a graph input"},
      {[](auto* r) {
         Step(r, "silu_and_mul", {{"x", "x"}});
         for (int i = 0; i < 2; ++i) {
           v1::GraphOutput* o = r->add_outputs();
           o->set_name(i == 0 ? "y0" : "y1");
           o->set_source("step0");
         }
       },
       StatusCode::kInvalidArgument, "already returned as 'y0'"},
  };
  for (const Case& c : cases) {
    v1::ExecuteGraphRequest r;
    (*r.mutable_inputs())["x"] = Header(v1::DTYPE_FLOAT32, {4, 64});
    c.make(&r);
    GraphPlan p;
    Status st = BuildGraphPlan(r, {}, &p);
    EXPECT_EQ(st.code(), c.code) << st.message();
    EXPECT_NE(st.message().find(c.text), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace kerneld::server

namespace kerneld::server {
namespace {

// The replay cache's key (docs/graphs.md, "When replay applies"): attr
// values and staged addresses are not in it; shapes, impls and buffers are.
TEST(GraphReplayKey, LeavesOutAttrValuesAndStagedAddressesButNotBuffersOrShapes) {
  auto plan_of = [](int64_t n, double factor) {
    v1::ExecuteGraphRequest r;
    (*r.mutable_inputs())["x"] = Header(v1::DTYPE_FLOAT32, {n});
    Step(&r, "scale", {{"x", "x"}})->mutable_attrs()->operator[]("factor").set_f(factor);
    Step(&r, "scale", {{"x", "step0"}})->mutable_attrs()->operator[]("factor").set_f(2);
    GraphPlan p;
    EXPECT_TRUE(BuildGraphPlan(r, {}, &p).ok());
    return p;
  };
  const GraphPlan a = plan_of(64, 0.5), b = plan_of(64, 3.0), c = plan_of(128, 0.5);
  const OpDef* scale = OpRegistry::Global().Find("scale");
  ASSERT_NE(scale, nullptr);
  ASSERT_GE(scale->impls.size(), 1u);
  const std::vector<const ImplDef*> impls(2, &scale->impls[0]);
  const std::string sa = GraphStructureKey(a, impls);
  EXPECT_EQ(sa, GraphStructureKey(b, impls));  // another factor: the same graph
  EXPECT_NE(sa, GraphStructureKey(c, impls));  // another shape
  if (scale->impls.size() > 1) {
    EXPECT_NE(sa, GraphStructureKey(a, {&scale->impls[1], &scale->impls[0]}));  // another impl
  }

  alignas(256) static char mem[4][512];
  auto view = [](char* p) {
    TensorView v;
    v.dtype = DType::kFloat32;
    v.shape = {64};
    v.data = p;
    return v;
  };
  GraphReplayOptions staged;
  staged.inputs = {""};
  staged.outputs = {""};
  // Staged tensors: the worker's address changes, the key does not.
  EXPECT_EQ(GraphReplayKey(sa, staged, {view(mem[0])}, {view(mem[1])}),
            GraphReplayKey(sa, staged, {view(mem[2])}, {view(mem[3])}));
  GraphReplayOptions buffers;
  buffers.inputs = {"buf-1-aa+0"};
  buffers.outputs = {"buf-2-bb+0"};
  const std::string k = GraphReplayKey(sa, buffers, {view(mem[0])}, {view(mem[1])});
  EXPECT_EQ(k, GraphReplayKey(sa, buffers, {view(mem[0])}, {view(mem[1])}));
  // Another address, or another buffer at the same address (unregistered
  // and registered again): another key, so no replay into stale memory.
  EXPECT_NE(k, GraphReplayKey(sa, buffers, {view(mem[2])}, {view(mem[1])}));
  GraphReplayOptions again = buffers;
  again.inputs = {"buf-3-cc+0"};
  EXPECT_NE(k, GraphReplayKey(sa, again, {view(mem[0])}, {view(mem[1])}));
  EXPECT_NE(k, GraphReplayKey(sa, staged, {view(mem[0])}, {view(mem[1])}));
}

}  // namespace
}  // namespace kerneld::server
