// Every bad input gets a status a person can act on, and leaves the daemon
// serving.
#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon({"--max_message_mb=1"}); }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    delete daemon_;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }
  void TearDown() override {
    // Whatever the test sent, the daemon still answers, correctly.
    EXPECT_TRUE(daemon_->Serving());
    v1::ExecuteResponse resp;
    EXPECT_TRUE(daemon_->client().Execute(ScaleRequest(DType::kFloat32, {8}, 2.0), &resp).ok());
  }
  grpc::Status Run(const v1::ExecuteRequest& req) {
    v1::ExecuteResponse resp;
    return daemon_->client().Execute(req, &resp);
  }
  static Daemon* daemon_;
};
Daemon* BadInputTest::daemon_ = nullptr;

#define EXPECT_STATUS(st, code, ...)                                                  \
  do {                                                                                \
    grpc::Status _s = (st);                                                           \
    EXPECT_EQ(_s.error_code(), grpc::StatusCode::code) << _s.error_message();         \
    for (const char* frag : std::vector<const char*>{__VA_ARGS__})                     \
      EXPECT_NE(_s.error_message().find(frag), std::string::npos)                     \
          << "message '" << _s.error_message() << "' lacks '" << frag << "'";        \
  } while (0)

TEST_F(BadInputTest, UnknownOp) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  req.set_op("frobnicate");
  EXPECT_STATUS(Run(req), NOT_FOUND, "unknown op 'frobnicate'", "scale");
}

TEST_F(BadInputTest, WrongDType) {
  v1::ExecuteRequest req;
  req.set_op("scale");
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_INT32);
  x.add_shape(4);
  x.set_inline_data(std::string(16, '\1'));
  (*req.mutable_attrs())["factor"].set_f(2);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "'x' dtype int32 not in {float16, bfloat16, float32}");
}

TEST_F(BadInputTest, UnspecifiedAndOutOfRangeDType) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  (*req.mutable_inputs())["x"].set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "dtype is unspecified");
  (*req.mutable_inputs())["x"].set_dtype(static_cast<v1::DType>(99));
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "99");
}

TEST_F(BadInputTest, InlineByteLengthMismatch) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  (*req.mutable_inputs())["x"].set_inline_data(std::string(12, '\0'));
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "12 bytes", "needs 16");
}

TEST_F(BadInputTest, NegativeDimension) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  auto& x = (*req.mutable_inputs())["x"];
  x.clear_shape();
  x.add_shape(-4);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "negative dimension");
}

TEST_F(BadInputTest, ElementCountOverflow) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  auto& x = (*req.mutable_inputs())["x"];
  x.clear_shape();
  x.add_shape(int64_t{1} << 32);
  x.add_shape(int64_t{1} << 32);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "larger than any tensor");
  // Fits in elements, overflows in bytes.
  x.clear_shape();
  x.add_shape(int64_t{1} << 62);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "larger than any tensor");
}

TEST_F(BadInputTest, MissingAndMistypedAttr) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  req.mutable_attrs()->clear();
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "missing required attr 'factor'");
  (*req.mutable_attrs())["factor"].set_s("two");
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "attr 'factor' must be float");
  (*req.mutable_attrs())["factor"].set_f(2);
  (*req.mutable_attrs())["bogus"].set_b(true);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "unknown attr 'bogus'");
  req.mutable_attrs()->erase("bogus");
  (*req.mutable_attrs())["factor"].Clear();
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "has no value");
}

TEST_F(BadInputTest, UnknownAndMissingInputs) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  (*req.mutable_inputs())["z"] = req.inputs().at("x");
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "unknown input 'z'", "{x}");
  req.mutable_inputs()->clear();
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "missing input 'x'");
}

TEST_F(BadInputTest, BadDeclaredOutput) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  auto& y = (*req.mutable_outputs())["y"];
  y.set_dtype(v1::DTYPE_FLOAT16);
  y.add_shape(4);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "output 'y' dtype float16, expected float32");
  y.set_dtype(v1::DTYPE_FLOAT32);
  y.set_shape(0, 5);
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "has shape [5], expected [4]");
}

TEST_F(BadInputTest, BufferRefToUnknownBuffer) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  auto& x = (*req.mutable_inputs())["x"];
  x.mutable_buffer()->set_buffer_id("b1");
  EXPECT_STATUS(Run(req), NOT_FOUND, "buffer 'b1' not found");
}

TEST_F(BadInputTest, MessageOverSizeLimit) {
  // The daemon runs with --max_message_mb=1.
  auto req = ScaleRequest(DType::kFloat32, {1 << 19}, 1.0);  // 2 MiB
  EXPECT_STATUS(Run(req), RESOURCE_EXHAUSTED);
}

TEST_F(BadInputTest, UnknownBackend) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  req.set_backend("tpu");
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "unknown backend 'tpu'", "cpu", "cuda");
}

TEST_F(BadInputTest, CudaBackendWithoutGpu) {
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(daemon_->client().GetServerInfo(&info).ok());
  for (const auto& d : info.devices())
    if (d.kind() == "cuda") GTEST_SKIP() << "this server has a GPU";
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  req.set_backend("cuda");
  grpc::Status st = Run(req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  // It says why: no device of that kind here, and why there is none.
  EXPECT_NE(st.error_message().find("cuda"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find(info.cuda_status()), std::string::npos) << st.error_message();
}

TEST_F(BadInputTest, UnknownDevice) {
  auto req = ScaleRequest(DType::kFloat32, {4}, 1.0);
  req.set_device("cuda:7");
  EXPECT_STATUS(Run(req), NOT_FOUND, "device 'cuda:7' not found");
  req.set_device("gpu0");
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "not a device name");
}

TEST_F(BadInputTest, EmptyOp) {
  v1::ExecuteRequest req;
  EXPECT_STATUS(Run(req), INVALID_ARGUMENT, "op is empty");
}

}  // namespace
}  // namespace kerneld::testing
