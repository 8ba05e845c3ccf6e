// The nvrtc backend through the daemon where there is no GPU (CI): the
// backend is named with why it cannot run, --jit=off says so, an unusable
// cache directory is one clear log line and requests are still served,
// WarmJit and ListJitCache answer, kernelctl jit drives them, a bad
// --jit_warm file stops start-up, and the JIT's Prometheus series exist.
// tests/gpu/jit_daemon_gpu_test.cc runs the kernels on a GPU.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "daemon_fixture.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::testing {
namespace {

v1::ExecuteRequest RmsNormRequest(const std::string& backend) {
  std::mt19937_64 rng(3);
  v1::ExecuteRequest req;
  req.set_op("rmsnorm");
  client::ToProto(client::Random(DType::kFloat32, {4, 256}, rng), &(*req.mutable_inputs())["x"]);
  client::ToProto(client::Random(DType::kFloat32, {256}, rng), &(*req.mutable_inputs())["weight"]);
  req.set_backend(backend);
  return req;
}

grpc::Status ListJit(Daemon& d, v1::ListJitCacheResponse* resp) {
  auto stub = v1::JitService::NewStub(d.client().channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->ListJitCache(&ctx, v1::ListJitCacheRequest(), resp);
}

grpc::Status Warm(Daemon& d, const v1::WarmJitRequest& req, v1::WarmJitResponse* resp) {
  auto stub = v1::JitService::NewStub(d.client().channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return stub->WarmJit(&ctx, req, resp);
}

// A fresh directory for a test's JIT cache (never the user's own cache).
std::string TempDir() {
  char tmpl[] = "/tmp/kerneld-jit-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

bool HaveGpuHere(Daemon& d) {
  v1::GetServerInfoResponse info;
  if (!d.client().GetServerInfo(&info).ok()) return false;
  for (const auto& dev : info.devices())
    if (dev.kind() == "cuda") return true;
  return false;
}

// Sets an environment variable for the daemons a test starts; restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Jit, MissingNvrtcIsTheBackendsReason) {
  ScopedEnv env("KERNELD_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.99");
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ExecuteResponse resp;
  grpc::Status st = d.client().Execute(RmsNormRequest("nvrtc"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("nvrtc: libnvrtc not found: "), std::string::npos)
      << st.error_message();
  v1::ListJitCacheResponse list;
  ASSERT_TRUE(ListJit(d, &list).ok());
  EXPECT_EQ(list.status().rfind("libnvrtc not found: ", 0), 0u) << list.status();
  EXPECT_EQ(list.nvrtc_version(), "");
  // Requests that do not name the backend are served as before.
  ASSERT_TRUE(d.client().Execute(RmsNormRequest(""), &resp).ok());
  EXPECT_NE(d.Log().find("nvrtc backend off: libnvrtc not found"), std::string::npos) << d.Log();
}

TEST(Jit, OffSaysSoAndServesOnAot) {
  Daemon d({"--jit=off"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ListJitCacheResponse list;
  ASSERT_TRUE(ListJit(d, &list).ok());
  EXPECT_EQ(list.mode(), "off");
  if (list.nvrtc_version().empty()) GTEST_SKIP() << "libnvrtc not installed: " << list.status();
  EXPECT_EQ(list.status(), "--jit=off");
  v1::ExecuteResponse resp;
  grpc::Status st = d.client().Execute(RmsNormRequest("nvrtc"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("--jit=off"), std::string::npos) << st.error_message();
  ASSERT_TRUE(d.client().Execute(RmsNormRequest(""), &resp).ok());
  EXPECT_NE(resp.info().backend(), "nvrtc");
}

TEST(Jit, ModesAreReportedAndAsyncServesOnAot) {
  for (const char* mode : {"sync", "async"}) {
    Daemon d({std::string("--jit=") + mode});
    ASSERT_TRUE(d.ok()) << d.Log();
    v1::ListJitCacheResponse list;
    ASSERT_TRUE(ListJit(d, &list).ok());
    EXPECT_EQ(list.mode(), mode);
    // Without a GPU the backend never serves, whatever the mode, and an
    // automatic request is served by the cpu backend at once.
    v1::ExecuteResponse resp;
    ASSERT_TRUE(d.client().Execute(RmsNormRequest(""), &resp).ok());
    if (!HaveGpuHere(d)) {
      EXPECT_EQ(resp.info().backend(), "cpu");
      if (!list.nvrtc_version().empty()) {
        EXPECT_EQ(list.status(), "no CUDA device");
      }
    }
  }
}

TEST(Jit, UnwritableCacheIsOneClearLogLineAndRequestsAreServed) {
  const std::string blocker = TempDir() + "/not-a-directory";
  std::ofstream(blocker) << "x";
  Daemon d({"--jit_cache_dir=" + blocker + "/jit"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ListJitCacheResponse list;
  ASSERT_TRUE(ListJit(d, &list).ok());
  if (list.nvrtc_version().empty()) GTEST_SKIP() << "libnvrtc not installed: " << list.status();
  const std::string log = d.Log();
  EXPECT_NE(log.find("JIT cache unusable: JIT cache directory '" + blocker + "/jit'"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("the cache is off, compiled kernels are kept in memory only"),
            std::string::npos)
      << log;
  EXPECT_NE(list.cache_status().find("the cache is off"), std::string::npos) << list.cache_status();
  v1::ExecuteResponse resp;
  ASSERT_TRUE(d.client().Execute(RmsNormRequest(""), &resp).ok());
}

TEST(Jit, WarmWithoutGpuNeedsAnArchOrAJitForm) {
  Daemon d({"--jit_cache_dir=" + TempDir() + "/jit"});
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ListJitCacheResponse list;
  ASSERT_TRUE(ListJit(d, &list).ok());
  if (list.nvrtc_version().empty()) GTEST_SKIP() << "libnvrtc not installed: " << list.status();
  if (HaveGpuHere(d)) GTEST_SKIP() << "a GPU is present (tests/gpu cover it)";
  v1::WarmJitRequest req;
  req.set_op("rmsnorm");
  req.set_dtype("bfloat16");
  req.add_shape(16);
  req.add_shape(4096);
  v1::WarmJitResponse resp;
  grpc::Status st = Warm(d, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  if (list.ops().empty()) {
    // A build without CUDA has no JIT plans: said, for any arch.
    EXPECT_NE(st.error_message().find("rmsnorm has no JIT form in this build"), std::string::npos)
        << st.error_message();
    req.set_arch("sm_90");
    st = Warm(d, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
    return;
  }
  EXPECT_NE(st.error_message().find("name the architecture"), std::string::npos)
      << st.error_message();
  // With an arch NVRTC compiles here (no GPU needed) into the cache; the
  // second warm finds it.
  req.set_arch("sm_90");
  st = Warm(d, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.kernels_size(), 1);
  EXPECT_FALSE(resp.kernels(0).cache_hit());
  EXPECT_EQ(resp.kernels(0).key().size(), 64u);
  EXPECT_NE(resp.kernels(0).kernel().find("kerneld::cuda::rmsnorm::"), std::string::npos);
  v1::WarmJitResponse again;
  ASSERT_TRUE(Warm(d, req, &again).ok());
  EXPECT_TRUE(again.kernels(0).cache_hit());
  ASSERT_TRUE(ListJit(d, &list).ok());
  EXPECT_EQ(list.entries_size(), 1);
}

TEST(Jit, BadWarmRequestsAreInvalidArgument) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::WarmJitRequest req;
  req.set_op("rmsnorm");
  req.set_dtype("float17");
  req.add_shape(4);
  v1::WarmJitResponse resp;
  EXPECT_EQ(Warm(d, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.set_dtype("float32");
  req.clear_shape();
  EXPECT_EQ(Warm(d, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.add_shape(-1);
  EXPECT_EQ(Warm(d, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(Jit, KernelctlJitListAndWarm) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string ctl = std::string(KERNELCTL_BINARY) + " --target " + d.target() + " jit ";
  std::string out;
  ASSERT_EQ(RunCapture(ctl + "list", &out), 0) << out;
  EXPECT_NE(out.find("mode async"), std::string::npos) << out;
  const int rc = RunCapture(ctl + "warm --op rmsnorm --dtype bfloat16 --shape 16x4096", &out);
  if (HaveGpuHere(d)) {
    EXPECT_EQ(rc, 0) << out;
  } else {
    EXPECT_EQ(rc, 1) << out;  // no GPU, no --arch (or no JIT form in this build): said
    EXPECT_NE(out.find("kernelctl: FAILED_PRECONDITION: "), std::string::npos) << out;
  }
  EXPECT_EQ(RunCapture(ctl + "warm --op rmsnorm --shape 16xx4096", &out), 2) << out;
  EXPECT_NE(out.find("expected AxB"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + "warm --op nosuchop --shape 16x4096", &out), 1) << out;
  EXPECT_NE(out.find("NOT_FOUND"), std::string::npos) << out;
}

TEST(Jit, BadWarmFileStopsStartUp) {
  const std::string file = TempDir() + "/warm.txt";
  std::ofstream(file) << "# kernels to compile at start\nrmsnorm float17 16x4096\n";
  std::string out;
  const int rc = RunCapture(
      std::string(KERNELD_BINARY) + " --listen=127.0.0.1:0 --metrics_listen=off --jit_warm=" + file,
      &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--jit_warm: " + file + ":2: unknown dtype 'float17'"), std::string::npos)
      << out;
}

TEST(Jit, WarmFileOfKernelsThisHostCannotBuildIsAWarning) {
  const std::string file = TempDir() + "/warm.txt";
  std::ofstream(file) << "rmsnorm bfloat16 16x4096\n";
  Daemon d({"--jit_warm=" + file});
  ASSERT_TRUE(d.ok()) << d.Log();
  if (HaveGpuHere(d)) GTEST_SKIP() << "a GPU is present (tests/gpu cover it)";
  EXPECT_NE(d.Log().find("--jit_warm: " + file + ":1: "), std::string::npos) << d.Log();
}

TEST(Jit, PrometheusSeries) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string m = d.Metrics();
  for (const char* name :
       {"kerneld_jit_cache_hits_total", "kerneld_jit_cache_misses_total",
        "kerneld_jit_cache_entries", "kerneld_jit_cache_bytes", "kerneld_jit_compiles_total"})
    EXPECT_TRUE(SeriesValue(m, name, {}).has_value()) << name << "\n" << m;
  EXPECT_NE(m.find("# TYPE kerneld_jit_compile_seconds histogram"), std::string::npos);
  EXPECT_TRUE(SeriesValue(m, "kerneld_jit_compile_seconds_count", {}).has_value());
}

// kerneld --jit_precompile_arch compiles a warm list for an architecture
// into the cache and exits, with no GPU (an image built on a host without
// one): in a CUDA build every line becomes an entry, and a second run finds
// them all; a build without CUDA has no JIT plans and says so. Nothing is
// served either way.
TEST(Jit, PrecompileForAnArchWithoutAGpu) {
  const std::string dir = TempDir();
  const std::string file = dir + "/warm.txt";
  std::ofstream(file) << "# an image's warm list\nrmsnorm bfloat16 16x8192\n"
                      << "silu_and_mul bfloat16 16x28672   # Llama-3-70B's MLP\n";
  const std::string cache = dir + "/cache";
  const std::string cmd =
      std::string(KERNELD_BINARY) +
      " --jit_precompile_arch=sm_90 --jit_precompile_sms=132 --jit_warm=" + file +
      " --jit_cache_dir=" + cache;
  std::string out;
  const int rc = RunCapture(cmd, &out);
  if (out.find("libnvrtc not found") != std::string::npos) {
    EXPECT_EQ(rc, 1) << out;
    GTEST_SKIP() << "no libnvrtc here: " << out;
  }
  if (out.find("no JIT form in this build") != std::string::npos) {
    EXPECT_EQ(rc, 1) << out;  // the CPU build: a line that cannot compile fails the list
    EXPECT_NE(out.find(file + ":2: "), std::string::npos) << out;
    return;
  }
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("2 kernels in " + cache + " (2 compiled, 0 already there)"), std::string::npos)
      << out;
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache))
    entries += e.path().extension() == ".kjit";
  EXPECT_EQ(entries, 2);
  ASSERT_EQ(RunCapture(cmd, &out), 0) << out;
  EXPECT_NE(out.find("(0 compiled, 2 already there)"), std::string::npos) << out;
}

TEST(Jit, PrecompileNeedsAWarmListAndAnArch) {
  std::string out;
  EXPECT_EQ(RunCapture(std::string(KERNELD_BINARY) + " --jit_precompile_arch=sm_90", &out), 2)
      << out;
  EXPECT_NE(out.find("--jit_precompile_arch needs --jit_warm=FILE"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(std::string(KERNELD_BINARY) + " --jit_precompile_arch=90", &out), 2) << out;
  EXPECT_NE(out.find("jit_precompile_arch"), std::string::npos) << out;
}

}  // namespace
}  // namespace kerneld::testing
