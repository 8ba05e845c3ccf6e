// The KServe front end's CUDA shared memory on a GPU (docs/kserve.md): a
// cudaMalloc'd region of this process registered by its raw
// cudaIpcMemHandle_t (CudaSharedMemoryRegister), scale read from and
// written into it zero copy (no tensor bytes in the messages: the
// transferred-bytes counter's buffer path moves, the inline one does not),
// the status and unregister, and a region past its allocation refused.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "daemon_fixture.h"
#include "gpu_util.h"
#include "inference/grpc_service.grpc.pb.h"

namespace kerneld::testing {
namespace {

using inference::GRPCInferenceService;

class KServeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(d_.ok()) << d_.Log();
    stub_ = GRPCInferenceService::NewStub(
        grpc::CreateChannel(d_.target(), grpc::InsecureChannelCredentials()));
  }
  template <class Req, class Resp>
  grpc::Status Call(grpc::Status (GRPCInferenceService::Stub::*m)(grpc::ClientContext*, const Req&,
                                                                  Resp*),
                    const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return (stub_.get()->*m)(&ctx, req, resp);
  }
  double Transferred(const std::string& direction, const std::string& path) {
    return SeriesValue(d_.Metrics(), "kerneld_transferred_bytes_total",
                       {"direction=\"" + direction + "\"", "path=\"" + path + "\""})
        .value_or(-1);
  }
  Daemon d_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

inference::ModelInferRequest ScaleInRegion(int n, uint64_t in_off, uint64_t out_off) {
  inference::ModelInferRequest req;
  req.set_model_name("scale");
  auto* x = req.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(n);
  auto& xp = *x->mutable_parameters();
  xp["shared_memory_region"].set_string_param("g");
  xp["shared_memory_byte_size"].set_int64_param(int64_t{n} * 4);
  xp["shared_memory_offset"].set_int64_param(static_cast<int64_t>(in_off));
  auto* y = req.add_outputs();
  y->set_name("y");
  auto& yp = *y->mutable_parameters();
  yp["shared_memory_region"].set_string_param("g");
  yp["shared_memory_byte_size"].set_int64_param(int64_t{n} * 4);
  yp["shared_memory_offset"].set_int64_param(static_cast<int64_t>(out_off));
  (*req.mutable_parameters())["factor"].set_double_param(3.0);
  (*req.mutable_parameters())["kerneld.backend"].set_string_param("cuda");
  return req;
}

TEST_F(KServeGpuTest, CudaSharedMemoryZeroCopy) {
  inference::ServerMetadataResponse md;
  ASSERT_TRUE(
      Call(&GRPCInferenceService::Stub::ServerMetadata, inference::ServerMetadataRequest(), &md)
          .ok());
  EXPECT_NE(std::find(md.extensions().begin(), md.extensions().end(), "cuda_shared_memory"),
            md.extensions().end());

  constexpr int kN = 4096;
  constexpr size_t kBytes = 1 << 20;
  void* base = nullptr;
  ASSERT_EQ(cudaMalloc(&base, kBytes), cudaSuccess);
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 97) - 48.0f;
  ASSERT_EQ(cudaMemcpy(base, x.data(), kN * 4, cudaMemcpyHostToDevice), cudaSuccess);
  cudaIpcMemHandle_t handle;
  ASSERT_EQ(cudaIpcGetMemHandle(&handle, base), cudaSuccess);

  inference::CudaSharedMemoryRegisterRequest reg;
  reg.set_name("g");
  reg.set_raw_handle(std::string(reinterpret_cast<const char*>(&handle), sizeof handle));
  reg.set_device_id(0);
  reg.set_byte_size(kBytes);
  inference::CudaSharedMemoryRegisterResponse reg_resp;
  grpc::Status st = Call(&GRPCInferenceService::Stub::CudaSharedMemoryRegister, reg, &reg_resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  inference::CudaSharedMemoryStatusResponse status;
  ASSERT_TRUE(Call(&GRPCInferenceService::Stub::CudaSharedMemoryStatus,
                   inference::CudaSharedMemoryStatusRequest(), &status)
                  .ok());
  ASSERT_EQ(status.regions().count("g"), 1u);
  EXPECT_EQ(status.regions().at("g").byte_size(), kBytes);
  EXPECT_EQ(status.regions().at("g").device_id(), 0u);

  const double inline_in = Transferred("in", "inline"), buffer_in = Transferred("in", "buffer");
  inference::ModelInferResponse resp;
  const auto req = ScaleInRegion(kN, 0, 65536);
  st = Call(&GRPCInferenceService::Stub::ModelInfer, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).parameters().at("shared_memory_region").string_param(), "g");
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  EXPECT_TRUE(resp.raw_output_contents(0).empty());  // the bytes stayed on the GPU
  EXPECT_LT(req.ByteSizeLong() + resp.ByteSizeLong(), 1024u);
  std::vector<float> y(kN);
  ASSERT_EQ(cudaMemcpy(y.data(), static_cast<char*>(base) + 65536, kN * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int i = 0; i < kN; ++i)
    ASSERT_EQ(y[static_cast<size_t>(i)], 3.0f * x[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(Transferred("in", "inline"), inline_in);
  EXPECT_EQ(Transferred("in", "buffer"), buffer_in + kN * 4);

  // Past the allocation: refused before anything runs.
  st = Call(&GRPCInferenceService::Stub::ModelInfer, ScaleInRegion(kN, kBytes - 8, 0), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  reg.set_name("too_big");
  reg.set_byte_size(kBytes * 4);
  st = Call(&GRPCInferenceService::Stub::CudaSharedMemoryRegister, reg, &reg_resp);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("too_big"), std::string::npos) << st.error_message();

  inference::CudaSharedMemoryUnregisterRequest unreg;
  unreg.set_name("g");
  inference::CudaSharedMemoryUnregisterResponse unreg_resp;
  ASSERT_TRUE(
      Call(&GRPCInferenceService::Stub::CudaSharedMemoryUnregister, unreg, &unreg_resp).ok());
  st = Call(&GRPCInferenceService::Stub::ModelInfer, ScaleInRegion(kN, 0, 65536), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_EQ(cudaFree(base), cudaSuccess);
  EXPECT_EQ(d_.Terminate(), 0) << d_.Log();
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
