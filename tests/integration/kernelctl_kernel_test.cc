// kernelctl kernel register | list | unregister | eval against a real
// daemon on loopback with --allow_user_kernels (docs/user-kernels.md), with
// the shipped example (examples/user_kernels): registration with its
// resources, the list, a compile error with NVRTC's log, unregistering, and
// eval's answer: FAILED_PRECONDITION on a host without a GPU, the table and
// the --json record on one with.
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

const std::string kAdmin = "admin-token-0123456789abcdef";

class Scratch {
 public:
  Scratch() {
    char t[] = "/tmp/kerneld-ukctl-XXXXXX";
    dir_ = mkdtemp(t);
    std::ofstream(dir_ + "/tokens") << kAdmin << " alice admin\n";
    chmod((dir_ + "/tokens").c_str(), 0600);
  }
  ~Scratch() {
    std::string cmd = "rm -rf " + dir_;
    if (std::system(cmd.c_str()) != 0) std::perror("rm");
  }
  const std::string& dir() const { return dir_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }

 private:
  std::string dir_;
};

client::KernelClient Admin(const Daemon& d) {
  client::ClientSecurity s;
  s.token = kAdmin;
  return client::KernelClient(d.target(), client::ClientOptions(256, std::chrono::seconds(60), s));
}

bool HaveGpuHere(Daemon& d) {
  v1::GetServerInfoResponse info;
  if (!Admin(d).GetServerInfo(&info).ok()) return false;
  for (const auto& dev : info.devices())
    if (dev.kind() == "cuda") return true;
  return false;
}

bool HaveNvrtc(Daemon& d) {
  auto stub = v1::JitService::NewStub(Admin(d).channel());
  grpc::ClientContext ctx;
  v1::ListJitCacheResponse r;
  return stub->ListJitCache(&ctx, v1::ListJitCacheRequest(), &r).ok() && !r.nvrtc_version().empty();
}

const std::string kExample = std::string(EXAMPLES_DIR) + "/user_kernels/my_silu_and_mul";

TEST(KernelctlKernel, RegisterListEvalUnregister) {
  Scratch s;
  Daemon d({"--allow_user_kernels", "--auth_tokens=" + s.dir() + "/tokens",
            "--jit_cache_dir=" + s.dir() + "/jit"});
  ASSERT_TRUE(d.ok()) << d.Log();
  if (!HaveNvrtc(d)) GTEST_SKIP() << "libnvrtc not found on this host";
  const std::string ctl =
      std::string(KERNELCTL_BINARY) + " --target " + d.target() + " --token " + kAdmin + " kernel ";
  std::string out;

  ASSERT_EQ(RunCapture(ctl + "register " + kExample + ".cu --spec " + kExample + ".json", &out), 0)
      << out;
  EXPECT_NE(out.find("registered my_silu_and_mul (owner token:alice)"), std::string::npos) << out;
  EXPECT_NE(out.find("my_silu_and_mul<__nv_bfloat16>: "), std::string::npos) << out;
  EXPECT_NE(out.find("spills 0/0 B"), std::string::npos) << out;
  // Again: the name is taken until --replace (from the JIT cache then).
  EXPECT_EQ(RunCapture(ctl + "register " + kExample + ".cu --spec " + kExample + ".json", &out), 1)
      << out;
  EXPECT_NE(out.find("kernelctl: ALREADY_EXISTS: "), std::string::npos) << out;
  ASSERT_EQ(
      RunCapture(ctl + "register " + kExample + ".cu --spec " + kExample + ".json --replace", &out),
      0)
      << out;
  EXPECT_NE(out.find("from the JIT cache"), std::string::npos) << out;

  ASSERT_EQ(RunCapture(ctl + "list", &out), 0) << out;
  EXPECT_NE(out.find("my_silu_and_mul          token:alice  my_silu_and_mul<T>"), std::string::npos)
      << out;
  EXPECT_NE(out.find("grid = (ceil(d / 256), rows), block = 256"), std::string::npos) << out;

  // eval: a GPU's table and record, or why not.
  const std::string json = s.dir() + "/eval.json";
  const int rc = RunCapture(ctl +
                                "eval my_silu_and_mul --against silu_and_mul --shapes x=64x8192 "
                                "--dtype bfloat16 --iterations 5 --json " +
                                json,
                            &out);
  if (HaveGpuHere(d)) {
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("max abs err"), std::string::npos) << out;
    std::ifstream f(json);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_NE(ss.str().find("\"user_us\""), std::string::npos) << ss.str();
  } else {
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("kernelctl: FAILED_PRECONDITION: EvaluateKernel: my_silu_and_mul runs on a "
                       "GPU, and this daemon has none"),
              std::string::npos)
        << out;
  }
  // Checked before the GPU either way: an input the op does not have, an
  // op that is not there, a bad --shapes.
  EXPECT_EQ(RunCapture(ctl + "eval my_silu_and_mul --against silu_and_mul --shapes w=4", &out), 1);
  EXPECT_NE(out.find("INVALID_ARGUMENT: EvaluateKernel: shapes: silu_and_mul has no input 'w'"),
            std::string::npos)
      << out;
  EXPECT_EQ(RunCapture(ctl + "eval my_silu_and_mul --against nope --shapes x=4x8", &out), 1);
  EXPECT_NE(out.find("NOT_FOUND"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + "eval my_silu_and_mul --against silu_and_mul --shapes x=4xx8", &out),
            2);
  EXPECT_NE(out.find("expected NAME=AxB or AxB"), std::string::npos) << out;

  ASSERT_EQ(RunCapture(ctl + "unregister my_silu_and_mul", &out), 0) << out;
  EXPECT_NE(out.find("unregistered my_silu_and_mul"), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + "unregister my_silu_and_mul", &out), 1) << out;
  EXPECT_NE(out.find("kernelctl: NOT_FOUND: "), std::string::npos) << out;
  ASSERT_EQ(RunCapture(ctl + "list", &out), 0) << out;
  EXPECT_NE(out.find("no user kernels"), std::string::npos) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(KernelctlKernel, CompileErrorAndBadSpec) {
  Scratch s;
  Daemon d({"--allow_user_kernels", "--auth_tokens=" + s.dir() + "/tokens",
            "--jit_cache_dir=" + s.dir() + "/jit"});
  ASSERT_TRUE(d.ok()) << d.Log();
  const std::string ctl =
      std::string(KERNELCTL_BINARY) + " --target " + d.target() + " --token " + kAdmin + " kernel ";
  std::string out;
  // A spec that is not JSON, or names fields the message has not: refused
  // by kernelctl, nothing sent.
  const std::string cu = s.Write("k.cu", "extern \"C\" __global__ void k() {}\n");
  EXPECT_EQ(RunCapture(ctl + "register " + cu + " --spec " + s.Write("bad.json", "{name: "), &out),
            2);
  EXPECT_NE(out.find("bad.json: not a JSON object"), std::string::npos) << out;
  EXPECT_EQ(
      RunCapture(ctl + "register " + cu + " --spec " + s.Write("u.json", "{\"nme\": \"k\"}"), &out),
      2);
  EXPECT_NE(out.find("u.json: "), std::string::npos) << out;
  EXPECT_EQ(RunCapture(ctl + "register /nonexistent.cu --spec " + kExample + ".json", &out), 2);
  EXPECT_NE(out.find("cannot read /nonexistent.cu"), std::string::npos) << out;

  if (!HaveNvrtc(d)) GTEST_SKIP() << "libnvrtc not found on this host";
  // A compile error: INVALID_ARGUMENT with NVRTC's log.
  std::ifstream f(kExample + ".cu");
  std::stringstream src;
  src << f.rdbuf();
  std::string broken = src.str();
  broken.replace(broken.find("__expf(-gate)"), 13, "__expf(-gate) +* 2");
  const std::string bad = s.Write("broken.cu", broken);
  EXPECT_EQ(RunCapture(ctl + "register " + bad + " --spec " + kExample + ".json", &out), 1) << out;
  EXPECT_NE(out.find("kernelctl: INVALID_ARGUMENT: my_silu_and_mul: NVRTC"), std::string::npos)
      << out;
  EXPECT_NE(out.find("error: operand of \"*\" must be a pointer"), std::string::npos) << out;
  EXPECT_NE(out.find("user_kernel.cu(28)"), std::string::npos) << out;  // the line
  ASSERT_EQ(RunCapture(ctl + "list", &out), 0) << out;
  EXPECT_NE(out.find("no user kernels"), std::string::npos) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
