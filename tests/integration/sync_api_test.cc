// --grpc_api=sync: Execute and ExecuteStream on gRPC's sync API serve the
// same answers as the callback API, on a real daemon: results, per-message
// errors that leave a stream open, a pipelined stream within its window, the
// stages in order, the other RPCs.
// (The malformed-message and token cases run under both APIs in
// stream_limits_test and security_test.)
#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

void ExpectScaled(const v1::ExecuteResponse& resp, const client::HostTensor& x, double factor) {
  ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
  const auto& y = resp.outputs().at("y");
  ASSERT_EQ(y.inline_data().size(), x.values.size() * sizeof(float));
  const auto* out = reinterpret_cast<const float*>(y.inline_data().data());
  for (size_t i = 0; i < x.values.size(); ++i)
    ASSERT_FLOAT_EQ(out[i], static_cast<float>(static_cast<float>(x.values[i]) * factor)) << i;
}

TEST(SyncApi, UnaryExecuteAnswersAndOrdersItsStages) {
  Daemon d({"--grpc_api=sync"});
  ASSERT_TRUE(d.ok()) << d.Log();
  for (int k = 0; k < 20; ++k) {
    client::HostTensor x;
    auto req = ScaleRequest(DType::kFloat32, {127}, 1.5, &x, static_cast<uint64_t>(k + 1));
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(req, &resp).ok());
    ExpectScaled(resp, x, 1.5);
    const v1::ExecutionInfo& i = resp.info();
    EXPECT_GT(i.decoded_ns(), 0);
    EXPECT_LE(i.decoded_ns(), i.scheduled_ns());
    EXPECT_LE(i.launched_ns(), i.kernel_done_ns());
    EXPECT_EQ(i.completed_ns(), i.total_ns());
  }
  // An error comes back as the call's status, with the server's text.
  v1::ExecuteRequest bad = ScaleRequest(DType::kFloat32, {4}, 2.0);
  bad.set_op("no_such_op");
  v1::ExecuteResponse resp;
  grpc::Status st = d.client().Execute(bad, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("unknown op 'no_such_op'"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(SyncApi, StreamAnswersInOrderAndAFailedRequestLeavesItOpen) {
  Daemon d({"--grpc_api=sync"});
  ASSERT_TRUE(d.ok()) << d.Log();
  auto s = d.client().OpenStream();
  std::vector<client::HostTensor> xs(10);
  for (int k = 0; k < 10; ++k) {
    v1::ExecuteRequest req = ScaleRequest(DType::kFloat32, {33}, 2.0, &xs[k], k + 1);
    req.set_request_id("r" + std::to_string(k));
    if (k == 4) (*req.mutable_inputs())["x"].set_inline_data("short");  // 5 bytes for 33 floats
    ASSERT_TRUE(s->Send(req));
  }
  s->CloseSend();
  v1::ExecuteResponse resp;
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE(s->Receive(&resp)) << k;
    EXPECT_EQ(resp.request_id(), "r" + std::to_string(k));  // one at a time, in order
    if (k == 4) {
      EXPECT_EQ(resp.status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      EXPECT_NE(resp.status().message().find("inline_data has 5 bytes"), std::string::npos)
          << resp.status().message();
      // The stream's response message is reused (sync_service.cc): nothing
      // of the successful answer before may be left in this one.
      EXPECT_TRUE(resp.outputs().empty());
      EXPECT_EQ(resp.info().backend(), "");
      EXPECT_EQ(resp.info().execute_ns(), 0);
    } else {
      ExpectScaled(resp, xs[k], 2.0);
      EXPECT_EQ(resp.status().message(), "") << k;  // not the failure's text
      EXPECT_EQ(resp.info().backend(), "cpu") << k;
      EXPECT_GT(resp.info().total_ns(), 0) << k;
    }
  }
  EXPECT_FALSE(s->Receive(&resp));
  EXPECT_TRUE(s->Finish().ok());
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// The sync stream is pipelined (service/sync_stream.h): a request that
// runs long does not hold back the ones read after it, whose answers come
// first (completion order); --stream_window bounds it, and a window of one
// is the ping-pong loop again.
TEST(SyncApi, StreamRunsRequestsConcurrentlyWithinItsWindow) {
  for (int window : {64, 1}) {
    Daemon d({"--grpc_api=sync", "--enable_test_ops", "--stream_window=" + std::to_string(window)});
    ASSERT_TRUE(d.ok()) << d.Log();
    v1::ExecuteRequest slow = ScaleRequest(DType::kFloat32, {16}, 1.0);
    slow.set_op("_test_sleep");
    slow.mutable_attrs()->clear();
    (*slow.mutable_attrs())["ms"].set_f(5);
    // Once: an op not yet seen to run long runs inline, on the stream's own
    // thread (--inline_max_us); after this one it goes to the pool.
    v1::ExecuteResponse warm;
    ASSERT_TRUE(d.client().Execute(slow, &warm).ok());
    (*slow.mutable_attrs())["ms"].set_f(1500);
    slow.set_request_id("slow");
    auto s = d.client().OpenStream();
    ASSERT_TRUE(s->Send(slow));
    client::HostTensor x;
    v1::ExecuteRequest fast = ScaleRequest(DType::kFloat32, {33}, 3.0, &x, 9);
    fast.set_request_id("fast");
    ASSERT_TRUE(s->Send(fast));
    s->CloseSend();
    std::vector<std::string> order;
    v1::ExecuteResponse resp;
    while (s->Receive(&resp)) {
      EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
      if (resp.request_id() == "fast") ExpectScaled(resp, x, 3.0);
      order.push_back(resp.request_id());
    }
    EXPECT_TRUE(s->Finish().ok());
    EXPECT_EQ(order, window == 1 ? (std::vector<std::string>{"slow", "fast"})
                                 : (std::vector<std::string>{"fast", "slow"}))
        << "window " << window;
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
  }
}

// SIGTERM: a sync stream with a request running answers it, then ends
// UNAVAILABLE (not CANCELLED), as the callback stream does; the daemon exits.
TEST(SyncApi, DrainAnswersAStreamsRequestThenEndsItUnavailable) {
  Daemon d({"--grpc_api=sync", "--enable_test_ops"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ExecuteRequest slow = ScaleRequest(DType::kFloat32, {16}, 1.0);
  slow.set_op("_test_sleep");
  slow.mutable_attrs()->clear();
  (*slow.mutable_attrs())["ms"].set_f(5);
  v1::ExecuteResponse warm;
  ASSERT_TRUE(d.client().Execute(slow, &warm).ok());  // to the pool from now on
  (*slow.mutable_attrs())["ms"].set_f(600);
  auto s = d.client().OpenStream();
  ASSERT_TRUE(s->Send(slow));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (SeriesValue(d.Metrics(), "kerneld_inflight_requests", {}).value_or(0) < 1 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  int exit_code = -2;
  std::thread term([&] { exit_code = d.Terminate(); });
  v1::ExecuteResponse resp;
  ASSERT_TRUE(s->Receive(&resp));
  EXPECT_EQ(resp.status().code(), 0) << resp.status().message();
  EXPECT_FALSE(s->Receive(&resp));
  const grpc::Status st = s->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  term.join();
  EXPECT_EQ(exit_code, 0) << d.Log();
}

TEST(SyncApi, ListKernelsAndServerInfoStillAnswer) {
  Daemon d({"--grpc_api=sync"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ListKernelsResponse lk;
  ASSERT_TRUE(d.client().ListKernels(&lk, "scale").ok());
  ASSERT_EQ(lk.kernels_size(), 1);
  EXPECT_EQ(lk.kernels(0).name(), "scale");
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(d.client().GetServerInfo(&info).ok());
  EXPECT_FALSE(info.version().empty());
  EXPECT_TRUE(d.Serving());
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

}  // namespace
}  // namespace kerneld::testing
