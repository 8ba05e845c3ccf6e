// grpc.health.v1 on both gRPC APIs: gRPC's default service (callback API)
// and kerneld's own (--grpc_api=sync, service/health_service.h) answer the
// same way, so clients and probes cannot tell them apart: Check of a known
// and an unknown service, Watch's first answer, and what an open Watch sees
// when the daemon stops. The sync one also bounds its Watch streams.
#include <thread>

#include "daemon_fixture.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace kerneld::testing {
namespace {

namespace health = grpc::health::v1;

class Health : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> Flags() const { return {"--grpc_api=" + GetParam()}; }
};

TEST_P(Health, CheckAndWatch) {
  Daemon d(Flags());
  ASSERT_TRUE(d.ok()) << d.Log();
  auto stub = health::Health::NewStub(d.client().channel());
  for (const char* service : {"", "kerneld.v1.KernelService", "kerneld.device/cpu"}) {
    grpc::ClientContext ctx;
    health::HealthCheckRequest req;
    req.set_service(service);
    health::HealthCheckResponse resp;
    ASSERT_TRUE(stub->Check(&ctx, req, &resp).ok()) << service;
    EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVING) << service;
  }
  {
    grpc::ClientContext ctx;
    health::HealthCheckRequest req;
    req.set_service("no.such.Service");
    health::HealthCheckResponse resp;
    EXPECT_EQ(stub->Check(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    health::HealthCheckRequest req;
    req.set_service("no.such.Service");
    auto w = stub->Watch(&ctx, req);
    health::HealthCheckResponse resp;
    ASSERT_TRUE(w->Read(&resp));
    EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVICE_UNKNOWN);
    ctx.TryCancel();
    while (w->Read(&resp)) {
    }
    EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // A watch open while the daemon stops sees NOT_SERVING, then its end.
  grpc::ClientContext ctx;
  health::HealthCheckRequest req;
  auto w = stub->Watch(&ctx, req);
  health::HealthCheckResponse resp;
  ASSERT_TRUE(w->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVING);
  std::thread stop([&] { EXPECT_EQ(d.Terminate(), 0) << d.Log(); });
  ASSERT_TRUE(w->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::NOT_SERVING);
  while (w->Read(&resp)) {
  }
  EXPECT_FALSE(w->Finish().ok());
  stop.join();
}

INSTANTIATE_TEST_SUITE_P(Apis, Health, ::testing::Values("callback", "sync"));

// Each sync Watch holds a gRPC thread: past the bound they are refused,
// with a message saying what to do, and Check still answers.
TEST(SyncHealth, WatchStreamsAreBounded) {
  Daemon d({"--grpc_api=sync"});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto stub = health::Health::NewStub(d.client().channel());
  constexpr int kMax = 64;  // SyncHealthService::kMaxWatches
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<health::HealthCheckResponse>>> watches;
  health::HealthCheckRequest req;
  health::HealthCheckResponse resp;
  for (int i = 0; i < kMax; ++i) {
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    watches.push_back(stub->Watch(ctxs.back().get(), req));
    ASSERT_TRUE(watches.back()->Read(&resp)) << i;  // open and answered
  }
  grpc::ClientContext extra;
  auto refused = stub->Watch(&extra, req);
  EXPECT_FALSE(refused->Read(&resp));
  grpc::Status st = refused->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("use Check"), std::string::npos) << st.error_message();
  bool serving = false;
  ASSERT_TRUE(d.client().Health("", &serving).ok());
  EXPECT_TRUE(serving);
  // Closing one frees its place.
  ctxs[0]->TryCancel();
  while (watches[0]->Read(&resp)) {
  }
  watches[0]->Finish();
  bool reopened = false;
  for (int tries = 0; tries < 50 && !reopened; ++tries) {
    grpc::ClientContext again;
    auto w = stub->Watch(&again, req);
    reopened = w->Read(&resp);
    again.TryCancel();
    while (w->Read(&resp)) {
    }
    w->Finish();
    if (!reopened) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(reopened);
  for (size_t i = 1; i < watches.size(); ++i) {  // [0] is finished already
    ctxs[i]->TryCancel();
    while (watches[i]->Read(&resp)) {
    }
    watches[i]->Finish();
  }
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

}  // namespace
}  // namespace kerneld::testing
