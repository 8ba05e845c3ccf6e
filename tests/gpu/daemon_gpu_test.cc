// Through the daemon, on a GPU: every op's inline request on the cuda (and
// cublas) backend equals the cpu backend's answer within tolerance; a device
// fault in a test-only op leaves the daemon serving from the CPU, with the
// GPU reported unhealthy.
#include <map>

#include "daemon_fixture.h"
#include "gpu_util.h"
#include "reference.h"

namespace kerneld::testing {
namespace {

struct OpCase {
  std::map<std::string, std::pair<DType, Shape>> inputs;  // kInvalid dtype: the sweep dtype
  std::map<std::string, v1::AttrValue> attrs;
  double tol_half = -1;  // rtol=atol override for f16/bf16
};

std::map<std::string, OpCase> Cases() {
  auto f = [](double v) { v1::AttrValue a; a.set_f(v); return a; };
  auto i = [](int64_t v) { v1::AttrValue a; a.set_i(v); return a; };
  auto b = [](bool v) { v1::AttrValue a; a.set_b(v); return a; };
  const DType kSweep = DType::kInvalid;
  std::map<std::string, OpCase> c;
  c["scale"] = {{{"x", {kSweep, {7, 4097}}}}, {{"factor", f(-1.25)}}};
  c["add"] = {{{"a", {kSweep, {5, 4095}}}, {"b", {kSweep, {5, 4095}}}}, {}};
  c["rmsnorm"] = {{{"x", {kSweep, {9, 4095}}}, {"weight", {kSweep, {4095}}}}, {}, 1e-2};
  c["fused_add_rmsnorm"] = {{{"x", {kSweep, {9, 4096}}}, {"residual", {kSweep, {9, 4096}}}, {"weight", {kSweep, {4096}}}}, {}, 2e-2};
  c["layernorm"] = {{{"x", {kSweep, {9, 4097}}}, {"gamma", {kSweep, {4097}}}, {"beta", {kSweep, {4097}}}}, {}, 1e-2};
  c["silu_and_mul"] = {{{"x", {kSweep, {9, 2 * 4095}}}}, {}};
  c["gelu_and_mul"] = {{{"x", {kSweep, {9, 2 * 4095}}}}, {}};
  c["gelu_tanh_and_mul"] = {{{"x", {kSweep, {9, 2 * 4095}}}}, {}};
  c["rope"] = {{{"q", {kSweep, {17, 8, 128}}}, {"k", {kSweep, {17, 2, 128}}}, {"positions", {DType::kInt64, {17}}},
                {"cos_sin_cache", {DType::kFloat32, {64, 128}}}},
               {{"is_neox", b(true)}}, 1e-2};
  c["softmax"] = {{{"logits", {kSweep, {3, 50257}}}}, {{"temperature", f(0.7)}}};
  c["gemm"] = {{{"a", {kSweep, {16, 1024}}}, {"b", {kSweep, {512, 1024}}}}, {{"transpose_b", b(true)}}, 2e-2};
  (void)i;
  return c;
}

class DaemonGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon({"--enable_test_ops"}); }
  static void TearDownTestSuite() {
    delete daemon_;  // may be unhealthy after the fault test: just stop it
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }
  static Daemon* daemon_;
};
Daemon* DaemonGpuTest::daemon_ = nullptr;

TEST_F(DaemonGpuTest, ServerSeesTheGpu) {
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(daemon_->client().GetServerInfo(&info).ok());
  ASSERT_GE(info.devices_size(), 2) << info.DebugString();
  EXPECT_EQ(info.devices(1).kind(), "cuda");
  EXPECT_EQ(info.devices(1).uuid().rfind("GPU-", 0), 0u);
  EXPECT_GT(info.cuda_driver_version(), 0);
}

// --gpu_timing: by default a GPU request's execute_ns is the worker's own
// span from the launch call to seeing the work done (no timing events on the
// fast path); with --gpu_timing=events it is the GPU's time between CUDA
// events, inside that span. Both keep the stages in order.
void ExpectGpuTiming(const std::vector<std::string>& flags, bool host_span) {
  Daemon d(flags);
  ASSERT_TRUE(d.ok()) << d.Log();
  for (int k = 0; k < 20; ++k) {
    client::HostTensor x;
    auto req = ScaleRequest(DType::kFloat16, {4096}, 2.0, &x);
    req.set_backend("cuda");
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(req, &resp).ok());
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
    const v1::ExecutionInfo& i = resp.info();
    SCOPED_TRACE(i.DebugString());
    EXPECT_EQ(i.backend(), "cuda");
    EXPECT_GT(i.execute_ns(), 0);
    EXPECT_LE(i.launched_ns(), i.kernel_done_ns());
    EXPECT_LE(i.kernel_done_ns(), i.total_ns());
    if (host_span) {
      EXPECT_EQ(i.execute_ns(), i.kernel_done_ns() - i.launched_ns());
    } else {
      EXPECT_LE(i.execute_ns(), i.kernel_done_ns() - i.launched_ns() + 20000);
    }
  }
}

TEST(GpuTiming, HostSpanByDefault) { ExpectGpuTiming({}, true); }
TEST(GpuTiming, CudaEventsOnRequest) { ExpectGpuTiming({"--gpu_timing=events"}, false); }

TEST_F(DaemonGpuTest, EveryOpOnCudaMatchesCpu) {
  v1::ListKernelsResponse lk;
  ASSERT_TRUE(daemon_->client().ListKernels(&lk).ok());
  auto cases = Cases();
  std::mt19937_64 rng(5);
  int checked = 0;
  for (const auto& k : lk.kernels()) {
    if (k.name().rfind("_test", 0) == 0) continue;
    if (!cases.count(k.name())) {
      std::printf("[ note ] no daemon case for op %s\n", k.name().c_str());
      continue;
    }
    const OpCase& oc = cases[k.name()];
    for (DType dt : FloatTypes()) {
      v1::ExecuteRequest req;
      req.set_op(k.name());
      for (const auto& [name, spec] : oc.inputs) {
        DType d = spec.first == DType::kInvalid ? dt : spec.first;
        client::HostTensor t = d == DType::kInt64 || d == DType::kInt32
                                   ? client::Random(d, spec.second, rng, 0, 64)
                                   : client::Random(d, spec.second, rng, -2, 2);
        client::ToProto(t, &(*req.mutable_inputs())[name]);
      }
      for (const auto& [name, a] : oc.attrs) (*req.mutable_attrs())[name] = a;
      for (const auto& impl : k.implementations()) {
        if (impl.backend() == "cpu") continue;
        v1::ExecuteRequest gr = req, cr = req;
        gr.set_backend(impl.backend());
        cr.set_backend("cpu");
        v1::ExecuteResponse g, c;
        grpc::Status gs = daemon_->client().Execute(gr, &g), cs = daemon_->client().Execute(cr, &c);
        ASSERT_TRUE(cs.ok()) << k.name() << " cpu: " << cs.error_message();
        if (gs.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
          std::printf("[ note ] %s/%s %s not eligible: %s\n", k.name().c_str(), impl.backend().c_str(),
                      std::string(DTypeName(dt)).c_str(), gs.error_message().c_str());
          continue;
        }
        ASSERT_TRUE(gs.ok()) << k.name() << " " << impl.backend() << ": " << gs.error_message();
        EXPECT_EQ(g.info().backend(), impl.backend());
        EXPECT_EQ(g.info().device().rfind("cuda:", 0), 0u);
        for (const auto& [name, t] : c.outputs()) {
          client::HostTensor want, got;
          ASSERT_TRUE(client::FromProto(t, &want));
          ASSERT_TRUE(client::FromProto(g.outputs().at(name), &got)) << name;
          double rtol, atol;
          client::Tolerance(got.dtype, &rtol, &atol);
          if (oc.tol_half > 0 && dt != DType::kFloat32) rtol = atol = oc.tol_half;
          if (k.name() == "gemm") atol *= 32;  // K = 1024 terms, different summation order
          auto cmp = client::Compare(got.values, want.values, rtol, atol);
          EXPECT_EQ(cmp.mismatches, 0) << k.name() << "/" << impl.backend() << " " << DTypeName(dt) << " output "
                                       << name << ": max abs err " << cmp.max_abs_err << " first bad "
                                       << cmp.first_bad;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// A decode whose page table points past the cache, on the cuda backend: the
// kernel's own index check flags it, the worker reads the flag after its
// wait (the deferred check, kerneld/call.h) and the request is refused
// INVALID_ARGUMENT naming the entry; the GPU stays healthy, and the same
// request with the index fixed then matches the CPU's answer.
TEST_F(DaemonGpuTest, HostileAttentionIndicesAreRefusedThroughTheWorker) {
  std::mt19937_64 rng(9);
  v1::ExecuteRequest req;
  req.set_op("batch_decode_paged");
  req.set_backend("cuda");
  auto in = [&](const char* name, const client::HostTensor& t) {
    client::ToProto(t, &(*req.mutable_inputs())[name]);
  };
  in("q", client::Random(DType::kBFloat16, {2, 8, 128}, rng, -1, 1));
  in("k_cache", client::Random(DType::kBFloat16, {4, 16, 2, 128}, rng, -1, 1));
  in("v_cache", client::Random(DType::kBFloat16, {4, 16, 2, 128}, rng, -1, 1));
  in("kv_indptr", {DType::kInt32, {3}, {0, 2, 3}});
  in("kv_indices", {DType::kInt32, {3}, {0, 9, 1}});  // page 9 of 4
  in("kv_last_page_len", {DType::kInt32, {2}, {16, 5}});
  v1::ExecuteResponse resp;
  grpc::Status st = daemon_->client().Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("kv_indices"), std::string::npos) << st.error_message();
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(daemon_->client().GetServerInfo(&info).ok());
  ASSERT_GE(info.devices_size(), 2);
  EXPECT_TRUE(info.devices(1).healthy());

  in("kv_indices", {DType::kInt32, {3}, {0, 3, 1}});
  v1::ExecuteResponse g, c;
  st = daemon_->client().Execute(req, &g);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(g.info().backend(), "cuda");
  req.set_backend("cpu");
  ASSERT_TRUE(daemon_->client().Execute(req, &c).ok());
  client::HostTensor want, got;
  ASSERT_TRUE(client::FromProto(c.outputs().at("o"), &want));
  ASSERT_TRUE(client::FromProto(g.outputs().at("o"), &got));
  auto cmp = client::Compare(got.values, want.values, 2e-2, 2e-2);
  EXPECT_EQ(cmp.mismatches, 0) << "max abs err " << cmp.max_abs_err;
}

// Last: after it the GPU is unusable for the rest of this process's life.
TEST_F(DaemonGpuTest, ZZDeviceFaultLeavesCpuServing) {
  v1::ExecuteRequest req;
  req.set_op("_test_fault");
  std::mt19937_64 rng(1);
  client::ToProto(client::Random(DType::kFloat32, {16}, rng), &(*req.mutable_inputs())["x"]);
  req.set_backend("cuda");
  v1::ExecuteResponse resp;
  grpc::Status st = daemon_->client().Execute(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL) << st.error_message();
  EXPECT_NE(st.error_message().find("cuda"), std::string::npos) << st.error_message();
  // The GPU now fails fast with UNAVAILABLE...
  auto scale = ScaleRequest(DType::kFloat32, {64}, 2.0);
  scale.set_backend("cuda");
  st = daemon_->client().Execute(scale, &resp);
  EXPECT_TRUE(st.error_code() == grpc::StatusCode::UNAVAILABLE ||
              st.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
      << st.error_code() << " " << st.error_message();
  // ...is reported unhealthy...
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(daemon_->client().GetServerInfo(&info).ok());
  ASSERT_GE(info.devices_size(), 2);
  EXPECT_FALSE(info.devices(1).healthy());
  bool serving = true;
  for (int i = 0; i < 30 && serving; ++i) {  // published within ~0.5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(daemon_->client().Health("kerneld.device/cuda:0", &serving).ok());
  }
  EXPECT_FALSE(serving) << "health still reports cuda:0 SERVING";
  // ...and the daemon keeps serving on the CPU, automatically.
  scale.clear_backend();
  st = daemon_->client().Execute(scale, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.info().backend(), "cpu");
  EXPECT_TRUE(daemon_->Serving());
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
