// User kernels on a daemon without a GPU (docs/user-kernels.md): who may
// register, name collisions, compile errors reaching the client with the
// log, the kernel listed and validated like a built-in, and Execute saying
// why it cannot run here. NVRTC compiles without a GPU; the tests that need
// it skip where libnvrtc is missing.
#include <sys/stat.h>

#include "daemon_fixture.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::testing {
namespace {

using client::ClientSecurity;
using client::KernelClient;

const std::string kAdmin = "admin-token-0123456789abcdef";
const std::string kUser = "user-token-0123456789abcdef";
const std::string kAdmin2 = "admin2-token-0123456789abcdef";

constexpr const char* kScaleSource = R"(
extern "C" __global__ void my_scale(const float* __restrict__ x, float* __restrict__ y,
                                    long long n, float factor) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * factor;
}
)";

// A directory for the token file and the JIT cache, removed at exit.
class Scratch {
 public:
  Scratch() {
    char t[] = "/tmp/kerneld-uk-XXXXXX";
    dir_ = mkdtemp(t);
    tokens_ = dir_ + "/tokens";
    std::ofstream(tokens_) << kAdmin << " alice admin\n"
                           << kUser << " bob user\n"
                           << kAdmin2 << " carol admin\n";
    chmod(tokens_.c_str(), 0600);
  }
  ~Scratch() {
    std::string cmd = "rm -rf " + dir_;
    if (std::system(cmd.c_str()) != 0) std::perror("rm");
  }
  std::vector<std::string> Flags(std::vector<std::string> more = {}) const {
    std::vector<std::string> f = {"--auth_tokens=" + tokens_, "--jit_cache_dir=" + dir_ + "/jit"};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }

 private:
  std::string dir_, tokens_;
};

std::unique_ptr<KernelClient> As(const Daemon& d, const std::string& token) {
  ClientSecurity s;
  s.token = token;
  return std::make_unique<KernelClient>(d.target(),
                                        client::ClientOptions(256, std::chrono::seconds(60), s));
}

v1::RegisterKernelRequest ScaleRequest(const std::string& name = "my_scale") {
  v1::RegisterKernelRequest r;
  r.set_name(name);
  r.set_cuda_source(kScaleSource);
  r.set_entry("my_scale");
  auto* x = r.add_inputs();
  x->set_name("x");
  x->add_dtypes(v1::DTYPE_FLOAT32);
  x->set_shape("[n]");
  auto* y = r.add_outputs();
  y->set_name("y");
  y->set_shape("same as 'x'");
  auto* f = r.add_attrs();
  f->set_name("factor");
  f->set_type("float");
  f->set_required(true);
  r.set_launch("grid = ceil(n / 256), block = 256");
  r.set_doc("y = x * factor (a user kernel)");
  return r;
}

grpc::Status Register(KernelClient& c, const v1::RegisterKernelRequest& req,
                      v1::RegisterKernelResponse* resp) {
  auto stub = v1::AdminService::NewStub(c.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub->RegisterKernel(&ctx, req, resp);
}

grpc::Status Unregister(KernelClient& c, const std::string& name) {
  auto stub = v1::AdminService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::UnregisterKernelRequest req;
  req.set_name(name);
  v1::UnregisterKernelResponse resp;
  return stub->UnregisterKernel(&ctx, req, &resp);
}

std::vector<std::string> UserKernelNames(KernelClient& c, bool all = false,
                                         grpc::Status* out = nullptr) {
  auto stub = v1::AdminService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::ListUserKernelsRequest req;
  req.set_all_principals(all);
  v1::ListUserKernelsResponse resp;
  grpc::Status st = stub->ListUserKernels(&ctx, req, &resp);
  if (out) *out = st;
  std::vector<std::string> names;
  for (const auto& k : resp.kernels()) names.push_back(k.owner() + "/" + k.kernel().name());
  return names;
}

bool Lists(KernelClient& c, const std::string& op) {
  v1::ListKernelsResponse r;
  if (!c.ListKernels(&r).ok()) return false;
  for (const auto& k : r.kernels())
    if (k.name() == op) return true;
  return false;
}

v1::ExecuteRequest ScaleCall(const std::string& op, int n = 1000) {
  v1::ExecuteRequest req;
  req.set_op(op);
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(n);
  x.set_inline_data(std::string(static_cast<size_t>(n) * 4, '\0'));
  (*req.mutable_attrs())["factor"].set_f(2.0);
  return req;
}

bool HaveNvrtc(const Daemon& d, KernelClient& c) {
  (void)d;
  auto stub = v1::JitService::NewStub(c.channel());
  grpc::ClientContext ctx;
  v1::ListJitCacheResponse r;
  return stub->ListJitCache(&ctx, v1::ListJitCacheRequest(), &r).ok() && !r.nvrtc_version().empty();
}

#define REQUIRE_NVRTC(d, c) \
  if (!HaveNvrtc(d, c)) GTEST_SKIP() << "libnvrtc not found on this host"

TEST(UserKernels, OffByDefault) {
  Scratch s;
  Daemon d(s.Flags());
  ASSERT_TRUE(d.ok()) << d.Log();
  auto admin = As(d, kAdmin);
  v1::RegisterKernelResponse resp;
  grpc::Status st = Register(*admin, ScaleRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("--allow_user_kernels"), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(UserKernelNames(*admin).empty());
  EXPECT_FALSE(Lists(*admin, "my_scale"));
}

TEST(UserKernels, AdminRegistersUserIsRefused) {
  Scratch s;
  Daemon d(s.Flags({"--allow_user_kernels"}));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto admin = As(d, kAdmin);
  auto user = As(d, kUser);
  REQUIRE_NVRTC(d, *admin);
  v1::RegisterKernelResponse resp;
  grpc::Status st = Register(*user, ScaleRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("admin"), std::string::npos);

  st = Register(*admin, ScaleRequest(), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.name(), "my_scale");
  EXPECT_EQ(resp.owner(), "token:alice");
  ASSERT_EQ(resp.resources_size(), 1) << resp.compile_log();
  EXPECT_EQ(resp.resources(0).arch(), "sm_90");  // --user_kernel_arch's default, no GPU here
  EXPECT_GT(resp.resources(0).registers(), 0);
  EXPECT_NE(resp.compile_log().find("Used"), std::string::npos) << resp.compile_log();

  // The same again: the owner must ask to replace it; the cache answers.
  st = Register(*admin, ScaleRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS) << st.error_message();
  auto again = ScaleRequest();
  again.mutable_options()->set_replace(true);
  st = Register(*admin, again, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(resp.cache_hit());
  EXPECT_EQ(resp.resources_size(), 1);

  // A built-in's name is refused.
  st = Register(*admin, ScaleRequest("scale"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(st.error_message().find("built-in"), std::string::npos) << st.error_message();

  // Listed for its owner, not for another principal.
  EXPECT_TRUE(Lists(*admin, "my_scale"));
  EXPECT_FALSE(Lists(*user, "my_scale"));
  EXPECT_EQ(UserKernelNames(*admin), std::vector<std::string>{"token:alice/my_scale"});
  EXPECT_TRUE(UserKernelNames(*user).empty());
  grpc::Status lst;
  UserKernelNames(*user, /*all=*/true, &lst);
  EXPECT_EQ(lst.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(UserKernelNames(*As(d, kAdmin2), /*all=*/true).size(), 1u);
}

TEST(UserKernels, CompileErrorCarriesTheLog) {
  Scratch s;
  Daemon d(s.Flags({"--allow_user_kernels"}));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto admin = As(d, kAdmin);
  REQUIRE_NVRTC(d, *admin);
  auto req = ScaleRequest();
  req.set_cuda_source(std::string(kScaleSource) +
                      "\n__global__ void other() { undefined_thing(); }\n");
  v1::RegisterKernelResponse resp;
  grpc::Status st = Register(*admin, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("undefined_thing"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("user_kernel.cu"), std::string::npos) << st.error_message();
  // A signature that does not match the spec says what it must be.
  req = ScaleRequest();
  req.set_cuda_source(
      "extern \"C\" __global__ void my_scale(float* x, float* y, int n, float f) {}");
  st = Register(*admin, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("must be int64_t n"), std::string::npos) << st.error_message();
  // A bad spec never reaches NVRTC.
  req = ScaleRequest();
  req.set_launch("grid = ceil(m / 256), block = 256");
  st = Register(*admin, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("unknown symbol 'm'"), std::string::npos) << st.error_message();
  req = ScaleRequest();
  req.set_cuda_source(std::string("#include \"/etc/passwd\"\n") + kScaleSource);
  st = Register(*admin, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("only #include <toolkit_header>"), std::string::npos);
  EXPECT_FALSE(Lists(*admin, "my_scale"));
}

TEST(UserKernels, ExecuteValidatesThenSaysWhyItCannotRun) {
  Scratch s;
  Daemon d(s.Flags({"--allow_user_kernels"}));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto admin = As(d, kAdmin);
  REQUIRE_NVRTC(d, *admin);
  v1::RegisterKernelResponse resp;
  ASSERT_TRUE(Register(*admin, ScaleRequest(), &resp).ok());

  // The schema is the spec's: a missing attr and a wrong dtype are refused
  // as for a built-in.
  auto bad = ScaleCall("my_scale");
  bad.mutable_attrs()->clear();
  v1::ExecuteResponse out;
  grpc::Status st = admin->Execute(bad, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("my_scale"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("factor"), std::string::npos) << st.error_message();
  bad = ScaleCall("my_scale");
  (*bad.mutable_inputs())["x"].set_dtype(v1::DTYPE_FLOAT16);
  (*bad.mutable_inputs())["x"].set_inline_data(std::string(2000, '\0'));
  st = admin->Execute(bad, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();

  // Valid, but no GPU: no eligible backend, with the reason.
  st = admin->Execute(ScaleCall("my_scale"), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("my_scale: no eligible backend"), std::string::npos)
      << st.error_message();
  EXPECT_NE(st.error_message().find("nvrtc"), std::string::npos) << st.error_message();

  // Another principal does not see it: an unknown op.
  st = As(d, kUser)->Execute(ScaleCall("my_scale"), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();

  // ListKernels describes it like a built-in.
  v1::ListKernelsResponse list;
  ASSERT_TRUE(admin->ListKernels(&list, "my_scale").ok());
  ASSERT_EQ(list.kernels_size(), 1);
  const auto& k = list.kernels(0);
  EXPECT_EQ(k.doc(), "y = x * factor (a user kernel)");
  ASSERT_EQ(k.inputs_size(), 1);
  EXPECT_EQ(k.inputs(0).shape(), "[n]");
  ASSERT_EQ(k.attrs_size(), 1);
  ASSERT_EQ(k.implementations_size(), 1);
  EXPECT_EQ(k.implementations(0).backend(), "nvrtc");

  // Unregistered: gone from the list, and an unknown op again.
  ASSERT_TRUE(Unregister(*admin, "my_scale").ok());
  EXPECT_EQ(Unregister(*admin, "my_scale").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(Lists(*admin, "my_scale"));
  st = admin->Execute(ScaleCall("my_scale"), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_EQ(d.Terminate(), 0);
}

grpc::Status Evaluate(KernelClient& c, const v1::EvaluateKernelRequest& req,
                      v1::EvaluateKernelResponse* resp) {
  auto stub = v1::AdminService::NewStub(c.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return stub->EvaluateKernel(&ctx, req, resp);
}

v1::EvaluateKernelRequest ScaleEval(const std::string& name = "my_scale") {
  v1::EvaluateKernelRequest r;
  r.set_name(name);
  r.set_against("scale");
  (*r.mutable_shapes())["x"].add_dims(4096);
  (*r.mutable_attrs())["factor"].set_f(2.0);
  return r;
}

// EvaluateKernel checks everything a host can (the kernel, the built-in,
// their schemas on the drawn inputs, the reference) before it says it
// needs a GPU: a CPU daemon answers a bad request as a GPU daemon would.
TEST(UserKernels, EvaluateChecksThenNeedsAGpu) {
  Scratch s;
  Daemon d(s.Flags({"--allow_user_kernels"}));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto admin = As(d, kAdmin);
  REQUIRE_NVRTC(d, *admin);
  v1::RegisterKernelResponse reg;
  ASSERT_TRUE(Register(*admin, ScaleRequest(), &reg).ok());
  v1::EvaluateKernelResponse out;

  grpc::Status st = Evaluate(*admin, ScaleEval(), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("my_scale runs on a GPU, and this daemon has none"),
            std::string::npos)
      << st.error_message();

  auto req = ScaleEval("nope");
  EXPECT_EQ(Evaluate(*admin, req, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Evaluate(*As(d, kAdmin2), ScaleEval(), &out).error_code(),
            grpc::StatusCode::NOT_FOUND);  // another principal's
  req = ScaleEval();
  req.set_against("no_such_op");
  st = Evaluate(*admin, req, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_NE(st.error_message().find("no_such_op"), std::string::npos) << st.error_message();
  req = ScaleEval();
  req.set_against("rmsnorm");  // inputs x, weight
  st = Evaluate(*admin, req, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("the inputs differ"), std::string::npos) << st.error_message();
  req = ScaleEval();
  req.mutable_shapes()->clear();
  st = Evaluate(*admin, req, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("input 'x' needs a shape"), std::string::npos)
      << st.error_message();
  req = ScaleEval();
  (*req.mutable_shapes())["x"].set_dims(0, int64_t{1} << 40);
  EXPECT_EQ(Evaluate(*admin, req, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  (*req.mutable_shapes())["x"].set_dims(0, -3);
  EXPECT_EQ(Evaluate(*admin, req, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = ScaleEval();
  req.mutable_attrs()->clear();  // the user kernel's 'factor' is required
  st = Evaluate(*admin, req, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("factor"), std::string::npos) << st.error_message();
  req = ScaleEval();
  req.set_dtype("int8");
  EXPECT_EQ(Evaluate(*admin, req, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = ScaleEval();
  req.set_iterations(100000);
  EXPECT_EQ(Evaluate(*admin, req, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = ScaleEval();
  req.set_device("gpu0");
  EXPECT_EQ(Evaluate(*admin, req, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Every evaluation is counted by its answer (docs/metrics.md).
  const std::string m = d.Metrics();
  auto evaluations = [&](const char* code) {
    return SeriesValue(m, "kerneld_user_kernel_evaluations_total",
                       {std::string("code=\"") + code + "\""})
        .value_or(0);
  };
  EXPECT_EQ(evaluations("FAILED_PRECONDITION"), 1) << m;
  EXPECT_EQ(evaluations("NOT_FOUND"), 3) << m;
  EXPECT_EQ(evaluations("INVALID_ARGUMENT"), 8) << m;
  EXPECT_EQ(SeriesValue(m, "kerneld_sandbox_starts_total", {}), 0.0) << "no GPU, no worker\n" << m;
  EXPECT_EQ(d.Terminate(), 0);
}

TEST(UserKernels, RolesVisibilityAndRateLimit) {
  Scratch s;
  Daemon d(s.Flags({"--allow_user_kernels=admin,user", "--user_kernel_compiles_per_minute=2"}));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto admin = As(d, kAdmin);
  auto user = As(d, kUser);
  REQUIRE_NVRTC(d, *admin);
  v1::RegisterKernelResponse resp;
  // Each principal its own "k": no one shadows another.
  ASSERT_TRUE(Register(*user, ScaleRequest("k"), &resp).ok());
  ASSERT_TRUE(Register(*admin, ScaleRequest("k"), &resp).ok());
  EXPECT_EQ(UserKernelNames(*user), std::vector<std::string>{"token:bob/k"});
  EXPECT_EQ(UserKernelNames(*admin), std::vector<std::string>{"token:alice/k"});
  ASSERT_TRUE(Register(*user, ScaleRequest("k2"), &resp).ok());
  // bob's third compile within the minute: refused, with when to retry.
  grpc::Status st = Register(*user, ScaleRequest("k3"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("--user_kernel_compiles_per_minute"), std::string::npos);
  // A spec error costs no compile.
  auto bad = ScaleRequest("k4");
  bad.set_entry("");
  EXPECT_EQ(Register(*admin, bad, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(UserKernels, VisibilityAllMakesNamesUnique) {
  Scratch s;
  Daemon d(s.Flags({"--allow_user_kernels", "--user_kernel_visibility=all"}));
  ASSERT_TRUE(d.ok()) << d.Log();
  auto alice = As(d, kAdmin);
  auto carol = As(d, kAdmin2);
  REQUIRE_NVRTC(d, *alice);
  v1::RegisterKernelResponse resp;
  ASSERT_TRUE(Register(*alice, ScaleRequest("shared_k"), &resp).ok());
  grpc::Status st = Register(*carol, ScaleRequest("shared_k"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS) << st.error_message();
  EXPECT_TRUE(Lists(*carol, "shared_k"));
  EXPECT_TRUE(Lists(*As(d, kUser), "shared_k"));
  // Only its owner unregisters it.
  EXPECT_EQ(Unregister(*carol, "shared_k").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(UserKernels, BadFlagValues) {
  for (const char* f : {"--allow_user_kernels=root", "--user_kernel_visibility=some",
                        "--user_kernel_timeout_ms=0", "--user_kernel_arch=90"}) {
    Daemon d({f});
    EXPECT_FALSE(d.ok()) << f;
    EXPECT_NE(d.Log().find("bad value"), std::string::npos) << f << ": " << d.Log();
  }
}

}  // namespace
}  // namespace kerneld::testing
