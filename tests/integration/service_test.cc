// The daemon end to end: Execute over TCP and a unix socket, ExecuteStream
// with mixed good and bad requests, ListKernels, GetServerInfo, health,
// reflection and the metrics endpoint.
#include <map>
#include <set>

#include "daemon_fixture.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "reference.h"

namespace kerneld::testing {
namespace {

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon(); }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    delete daemon_;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }
  static Daemon* daemon_;
};
Daemon* ServiceTest::daemon_ = nullptr;

void ExpectScaled(const client::HostTensor& x, double factor, const v1::ExecuteResponse& resp) {
  client::HostTensors ref;
  std::string err;
  ASSERT_TRUE(client::Reference("scale", {{"x", x}}, {{"factor", factor}}, &ref, &err)) << err;
  client::HostTensor y;
  ASSERT_TRUE(client::FromProto(resp.outputs().at("y"), &y));
  EXPECT_EQ(y.shape, x.shape);
  double rtol, atol;
  client::Tolerance(x.dtype, &rtol, &atol);
  EXPECT_EQ(client::Compare(y.values, ref["y"].values, rtol, atol).mismatches, 0);
}

TEST_F(ServiceTest, ExecuteScaleEachDType) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    client::HostTensor x;
    auto req = ScaleRequest(dt, {4, 1027}, -2.5, &x);
    req.set_request_id("r-" + std::string(DTypeName(dt)));
    v1::ExecuteResponse resp;
    grpc::Status st = daemon_->client().Execute(req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.request_id(), req.request_id());
    EXPECT_EQ(resp.status().code(), 0);
    EXPECT_EQ(resp.info().backend(), "cpu");
    EXPECT_EQ(resp.info().device(), "cpu");
    EXPECT_GT(resp.info().total_ns(), 0);
    EXPECT_GE(resp.info().total_ns(), resp.info().queue_ns());
    ExpectScaled(x, -2.5, resp);
  }
}

TEST_F(ServiceTest, ExecuteOverUnixSocket) {
  client::KernelClient c(daemon_->unix_target());
  client::HostTensor x;
  auto req = ScaleRequest(DType::kFloat32, {4097}, 3.14, &x);
  v1::ExecuteResponse resp;
  grpc::Status st = c.Execute(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ExpectScaled(x, 3.14, resp);
}

TEST_F(ServiceTest, ExplicitCpuBackendAndDeviceAndDeclaredOutput) {
  client::HostTensor x;
  auto req = ScaleRequest(DType::kBFloat16, {128}, 0.5, &x);
  req.set_backend("cpu");
  req.set_device("cpu");
  auto& out = (*req.mutable_outputs())["y"];
  out.set_dtype(v1::DTYPE_BFLOAT16);
  out.add_shape(128);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(daemon_->client().Execute(req, &resp).ok());
  ExpectScaled(x, 0.5, resp);
}

TEST_F(ServiceTest, StreamOfThousandMixedRequests) {
  auto stream = daemon_->client().OpenStream();
  std::map<std::string, client::HostTensor> good;
  std::map<std::string, int> bad;  // id -> expected code
  std::vector<v1::ExecuteRequest> reqs;
  for (int i = 0; i < 1000; ++i) {
    std::string id = std::to_string(i);
    client::HostTensor x;
    auto req = ScaleRequest(DType::kFloat16, {1 + i % 300}, 1.5, &x, static_cast<uint64_t>(i));
    req.set_request_id(id);
    switch (i % 5) {
      case 1:
        req.set_op("no_such_op");
        bad[id] = grpc::StatusCode::NOT_FOUND;
        break;
      case 3:
        req.mutable_attrs()->clear();
        bad[id] = grpc::StatusCode::INVALID_ARGUMENT;
        break;
      default:
        good[id] = x;
    }
    reqs.push_back(std::move(req));
  }
  std::thread writer([&] {
    for (const auto& r : reqs) ASSERT_TRUE(stream->Send(r));
    stream->CloseSend();
  });
  std::set<std::string> seen;
  v1::ExecuteResponse resp;
  while (stream->Receive(&resp)) {
    const std::string& id = resp.request_id();
    EXPECT_TRUE(seen.insert(id).second) << "duplicate response " << id;
    if (good.count(id)) {
      EXPECT_EQ(resp.status().code(), 0) << id << ": " << resp.status().message();
      ExpectScaled(good[id], 1.5, resp);
    } else {
      ASSERT_TRUE(bad.count(id)) << id;
      EXPECT_EQ(resp.status().code(), bad[id]) << id << ": " << resp.status().message();
      EXPECT_FALSE(resp.status().message().empty());
      EXPECT_EQ(resp.outputs_size(), 0);
    }
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST_F(ServiceTest, ListKernelsDescribesScale) {
  v1::ListKernelsResponse resp;
  ASSERT_TRUE(daemon_->client().ListKernels(&resp).ok());
  const v1::KernelInfo* scale = nullptr;
  for (const auto& k : resp.kernels())
    if (k.name() == "scale") scale = &k;
  ASSERT_NE(scale, nullptr);
  ASSERT_EQ(scale->inputs_size(), 1);
  EXPECT_EQ(scale->inputs(0).name(), "x");
  EXPECT_EQ(scale->inputs(0).dtypes_size(), 3);
  ASSERT_EQ(scale->attrs_size(), 1);
  EXPECT_EQ(scale->attrs(0).name(), "factor");
  EXPECT_TRUE(scale->attrs(0).required());
  bool cpu_eligible = false;
  for (const auto& impl : scale->implementations()) {
    for (const auto& d : impl.devices()) {
      if (impl.backend() == "cpu" && d.device() == "cpu") cpu_eligible = d.eligible();
      if (impl.backend() == "cuda" && d.device() == "cpu") {
        EXPECT_FALSE(d.eligible());
        EXPECT_NE(d.reason().find("needs a cuda device"), std::string::npos) << d.reason();
      }
    }
  }
  EXPECT_TRUE(cpu_eligible);
  v1::ListKernelsResponse one;
  EXPECT_EQ(daemon_->client().ListKernels(&one, "nope").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ListKernelsCarriesPerRequestRanking) {
  // gemm's cuda decode kernel outranks cublas on some shapes
  // (ImplDef::priority_for); ListKernels says where, in words.
  v1::ListKernelsResponse resp;
  ASSERT_TRUE(daemon_->client().ListKernels(&resp, "gemm").ok());
  ASSERT_EQ(resp.kernels_size(), 1);
  const v1::ImplementationInfo *cpu = nullptr, *cuda = nullptr, *cublas = nullptr;
  for (const auto& impl : resp.kernels(0).implementations()) {
    if (impl.backend() == "cpu") cpu = &impl;
    if (impl.backend() == "cuda") cuda = &impl;
    if (impl.backend() == "cublas") cublas = &impl;
  }
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->priority_note(), "");
#ifdef KERNELD_WITH_CUDA
  ASSERT_NE(cuda, nullptr);
  ASSERT_NE(cublas, nullptr);
  EXPECT_NE(cuda->priority_note().find("ranks above cublas for float32"), std::string::npos)
      << cuda->priority_note();
  EXPECT_LT(cuda->priority(), cublas->priority());  // below cublas everywhere else
  EXPECT_EQ(cublas->priority_note(), "");
#else
  EXPECT_EQ(cuda, nullptr);
  EXPECT_EQ(cublas, nullptr);
#endif
}

TEST_F(ServiceTest, ServerInfo) {
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(daemon_->client().GetServerInfo(&info).ok());
  EXPECT_FALSE(info.version().empty());
  EXPECT_FALSE(info.git_revision().empty());
  ASSERT_GE(info.devices_size(), 1);
  EXPECT_EQ(info.devices(0).kind(), "cpu");
  EXPECT_EQ(info.devices(0).id(), "cpu");
  EXPECT_TRUE(info.devices(0).healthy());
  bool has_cpu = false;
  for (const auto& b : info.backends()) has_cpu |= b == "cpu";
  EXPECT_TRUE(has_cpu);
  bool has_gpu = false;
  for (const auto& d : info.devices()) has_gpu |= d.kind() == "cuda";
  if (!has_gpu) {
    EXPECT_FALSE(info.cuda_status().empty()) << "no GPU and no reason given";
  }
}

TEST_F(ServiceTest, HealthServing) {
  bool serving = false;
  ASSERT_TRUE(daemon_->client().Health("", &serving).ok());
  EXPECT_TRUE(serving);
  ASSERT_TRUE(daemon_->client().Health("kerneld.v1.KernelService", &serving).ok());
  EXPECT_TRUE(serving);
  ASSERT_TRUE(daemon_->client().Health("kerneld.device/cpu", &serving).ok());
  EXPECT_TRUE(serving);
}

TEST_F(ServiceTest, ReflectionListsServices) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(daemon_->client().channel());
  grpc::ClientContext ctx;
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::set<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.insert(s.name());
  EXPECT_TRUE(names.count("kerneld.v1.KernelService")) << resp.DebugString();
  EXPECT_TRUE(names.count("grpc.health.v1.Health")) << resp.DebugString();
  // The descriptor of our API is served too (grpcurl needs it).
  req.set_file_containing_symbol("kerneld.v1.KernelService");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.file_descriptor_response().file_descriptor_proto_size(), 1);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceTest, MetricsCountRequestsWithBoundedLabels) {
  auto req = ScaleRequest(DType::kFloat32, {16}, 2.0);
  v1::ExecuteResponse resp;
  ASSERT_TRUE(daemon_->client().Execute(req, &resp).ok());
  req.set_op("client_made_up_op_name");
  EXPECT_EQ(daemon_->client().Execute(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  std::string m = daemon_->Metrics();
  EXPECT_NE(m.find("# TYPE kerneld_request_duration_seconds histogram"), std::string::npos)
      << m.substr(0, 500);
  auto ok = SeriesValue(m, "kerneld_request_duration_seconds_count",
                        {"op=\"scale\"", "backend=\"cpu\"", "device=\"cpu\"", "code=\"OK\""});
  ASSERT_TRUE(ok.has_value()) << m;
  EXPECT_GE(*ok, 1);
  auto nf = SeriesValue(m, "kerneld_requests_total",
                        {"op=\"_unknown\"", "code=\"NOT_FOUND\"", "backend=\"none\""});
  ASSERT_TRUE(nf.has_value()) << m;
  EXPECT_GE(*nf, 1);
  EXPECT_TRUE(
      SeriesValue(m, "kerneld_execute_duration_seconds_count", {"op=\"scale\"", "device=\"cpu\""}));
  EXPECT_TRUE(SeriesValue(m, "kerneld_device_healthy", {"device=\"cpu\""}).value_or(0) == 1);
  EXPECT_GT(
      SeriesValue(m, "kerneld_transferred_bytes_total", {"direction=\"in\"", "path=\"inline\""})
          .value_or(0),
      0);
  // A client's op name never becomes a label value.
  EXPECT_EQ(m.find("client_made_up_op_name"), std::string::npos);
}

}  // namespace
}  // namespace kerneld::testing
