// The daemon's flag parser on flags that pick behaviour rather than sizes:
// a value outside the set is refused with the flag's name, so a typo never
// silently runs the default.
#include "config.h"

#include <gtest/gtest.h>

namespace kerneld::server {
namespace {

std::string Parse(std::vector<const char*> args, Config* cfg) {
  args.insert(args.begin(), "kerneld");
  bool help = false;
  return ParseFlags(static_cast<int>(args.size()), const_cast<char**>(args.data()), cfg, &help);
}

TEST(Config, GpuTimingIsHostByDefaultAndTakesEvents) {
  Config d;
  EXPECT_EQ(Parse({}, &d), "");
  EXPECT_EQ(d.gpu_timing, "host");
  Config e;
  EXPECT_EQ(Parse({"--gpu_timing=events"}, &e), "");
  EXPECT_EQ(e.gpu_timing, "events");
  Config h;
  EXPECT_EQ(Parse({"--gpu_timing", "host"}, &h), "");
  EXPECT_EQ(h.gpu_timing, "host");
}

TEST(Config, GpuTimingRefusesOtherValuesByName) {
  Config c;
  const std::string err = Parse({"--gpu_timing=cupti"}, &c);
  EXPECT_NE(err.find("gpu_timing"), std::string::npos) << err;
}

TEST(Config, GrpcApiIsSyncByDefaultAndTakesBothNames) {
  Config d;
  EXPECT_EQ(Parse({}, &d), "");
  EXPECT_EQ(d.grpc_api, "sync");
  Config s;
  EXPECT_EQ(Parse({"--grpc_api=sync"}, &s), "");
  EXPECT_EQ(s.grpc_api, "sync");
  Config cb;
  EXPECT_EQ(Parse({"--grpc_api=callback"}, &cb), "");
  EXPECT_EQ(cb.grpc_api, "callback");
  Config bad;
  const std::string err = Parse({"--grpc_api=async"}, &bad);
  EXPECT_NE(err.find("grpc_api"), std::string::npos) << err;
}

TEST(Config, GrpcSyncPollersAutomaticByDefaultAndBounded) {
  Config d;
  EXPECT_EQ(Parse({}, &d), "");
  EXPECT_EQ(d.grpc_sync_pollers, 0);
  Config s;
  EXPECT_EQ(Parse({"--grpc_api=sync", "--grpc_sync_pollers=2"}, &s), "");
  EXPECT_EQ(s.grpc_sync_pollers, 2);
  for (const char* bad :
       {"--grpc_sync_pollers=-1", "--grpc_sync_pollers=1025", "--grpc_sync_pollers=two"}) {
    Config c;
    const std::string err = Parse({"--grpc_api=sync", bad}, &c);
    EXPECT_NE(err.find("grpc_sync_pollers"), std::string::npos) << bad << ": " << err;
  }
  // The callback API has no pollers to bound: said, not ignored.
  Config cb;
  const std::string err = Parse({"--grpc_api=callback", "--grpc_sync_pollers=2"}, &cb);
  EXPECT_NE(err.find("--grpc_api=sync"), std::string::npos) << err;
}

TEST(Config, CudaStreamsDefaultFourAndBounded) {
  Config d;
  EXPECT_EQ(Parse({}, &d), "");
  EXPECT_EQ(d.cuda_streams, 4);
  Config s;
  EXPECT_EQ(Parse({"--cuda_streams=32"}, &s), "");
  EXPECT_EQ(s.cuda_streams, 32);
  for (const char* bad : {"--cuda_streams=0", "--cuda_streams=257", "--cuda_streams=x"}) {
    Config c;
    const std::string err = Parse({bad}, &c);
    EXPECT_NE(err.find("cuda_streams"), std::string::npos) << bad << ": " << err;
  }
}

}  // namespace
}  // namespace kerneld::server
