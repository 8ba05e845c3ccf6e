// User kernels on a GPU (docs/user-kernels.md): a user `scale` matches the
// built-in bit for bit; a kernel that writes out of bounds, one that calls
// __trap(), one that reads memory it was not given and one that never ends
// each fail their own request with the right code, while built-in ops on
// the same GPU, running meanwhile, see no error; the sandbox is replaced
// each time. EvaluateKernel checks and times the user scale against the
// built-in. Exits 77 (skipped) without a GPU.
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "daemon_fixture.h"
#include "gpu_util.h"
#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::testing {
namespace {

constexpr const char* kBody = R"(
extern "C" __global__ void k(const float* __restrict__ x, float* __restrict__ y, long long n,
                             float factor) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  BODY
}
)";

v1::RegisterKernelRequest Spec(const std::string& name, const std::string& body) {
  v1::RegisterKernelRequest r;
  r.set_name(name);
  std::string src = kBody;
  src.replace(src.find("BODY"), 4, body);
  r.set_cuda_source(src);
  r.set_entry("k");
  auto* x = r.add_inputs();
  x->set_name("x");
  x->add_dtypes(v1::DTYPE_FLOAT32);
  x->set_shape("[n]");
  r.add_outputs()->set_name("y");
  r.mutable_outputs(0)->set_shape("same as 'x'");
  auto* f = r.add_attrs();
  f->set_name("factor");
  f->set_type("float");
  f->set_required(true);
  r.set_launch("grid = ceil(n / 256), block = 256");
  return r;
}

v1::ExecuteRequest Call(const std::string& op, const std::string& bytes,
                        const std::string& backend) {
  v1::ExecuteRequest req;
  req.set_op(op);
  req.set_backend(backend);
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(v1::DTYPE_FLOAT32);
  x.add_shape(static_cast<int64_t>(bytes.size() / 4));
  x.set_inline_data(bytes);
  (*req.mutable_attrs())["factor"].set_f(1.7);
  return req;
}

std::string RandomFloats(int n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2, 2);
  std::string b(static_cast<size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) {
    const float v = u(rng);
    std::memcpy(&b[static_cast<size_t>(i) * 4], &v, 4);
  }
  return b;
}

class UserKernelGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    // The timeout must leave room for the driver to report a trap: on the
    // H100 that took 0.6-0.8 s (user_kernel_bench), and with 1000 ms an
    // evaluated trapper now and then ran out of time (DEADLINE_EXCEEDED)
    // before its fault came back (INTERNAL).
    d_ = std::make_unique<Daemon>(
        std::vector<std::string>{"--allow_user_kernels", "--user_kernel_timeout_ms=3000",
                                 "--jit_cache_dir=/tmp/kerneld-ukgpu-cache"});
    ASSERT_TRUE(d_->ok()) << d_->Log();
  }
  // The unix socket: the test's uid is the daemon's, an admin.
  client::KernelClient& admin() { return d_->unix_client(); }
  grpc::Status Register(const v1::RegisterKernelRequest& r) {
    auto stub = v1::AdminService::NewStub(admin().channel());
    grpc::ClientContext ctx;
    v1::RegisterKernelResponse resp;
    return stub->RegisterKernel(&ctx, r, &resp);
  }
  // Runs built-in scale on the GPU until stopped; counts its failures.
  void StartBuiltins() {
    stop_ = false;
    bg_ = std::thread([this] {
      client::KernelClient c(d_->target());
      const std::string bytes = RandomFloats(4096);
      while (!stop_) {
        v1::ExecuteResponse out;
        if (!c.Execute(Call("scale", bytes, "cuda"), &out).ok()) errors_++;
        calls_++;
      }
    });
  }
  void StopBuiltins() {
    stop_ = true;
    bg_.join();
  }
  std::unique_ptr<Daemon> d_;
  std::thread bg_;
  std::atomic<bool> stop_{false};
  std::atomic<int> errors_{0}, calls_{0};
};

TEST_F(UserKernelGpu, ScaleMatchesTheBuiltinBitForBit) {
  ASSERT_TRUE(Register(Spec("user_scale", "if (i < n) y[i] = x[i] * factor;")).ok());
  for (int n : {1, 127, 128, 4097, 1 << 20}) {
    const std::string bytes = RandomFloats(n);
    v1::ExecuteResponse mine, builtin;
    grpc::Status st = admin().Execute(Call("user_scale", bytes, ""), &mine);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(mine.info().backend(), "nvrtc");
    ASSERT_TRUE(admin().Execute(Call("scale", bytes, "cuda"), &builtin).ok());
    EXPECT_EQ(mine.outputs().at("y").inline_data(), builtin.outputs().at("y").inline_data())
        << "n=" << n;
  }
}

// EvaluateKernel: the user scale against the built-in on 2^24 floats. Both
// outputs are bit-identical (above), so both are as far from the float64
// reference (a float32 product's rounding, at most 2^-24 relative); both
// are timed, beside a copy of the same bytes. A kernel that faults while
// evaluated fails INTERNAL like an Execute, and the next evaluation runs on
// a fresh sandbox.
TEST_F(UserKernelGpu, EvaluateAgainstTheBuiltinScale) {
  ASSERT_TRUE(Register(Spec("user_scale", "if (i < n) y[i] = x[i] * factor;")).ok());
  ASSERT_TRUE(Register(Spec("trapper", "if (i == 0) __trap();")).ok());
  auto stub = v1::AdminService::NewStub(admin().channel());
  auto evaluate = [&](const std::string& name, v1::EvaluateKernelResponse* resp,
                      int64_t n = int64_t{1} << 24) {
    v1::EvaluateKernelRequest req;
    req.set_name(name);
    req.set_against("scale");
    (*req.mutable_shapes())["x"].add_dims(n);
    (*req.mutable_attrs())["factor"].set_f(1.7);
    req.set_iterations(20);
    req.set_seed(3);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    return stub->EvaluateKernel(&ctx, req, resp);
  };
  v1::EvaluateKernelResponse r;
  grpc::Status st = evaluate("user_scale", &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(r.errors_size(), 1);
  const auto& e = r.errors(0);
  EXPECT_EQ(e.output(), "y");
  EXPECT_EQ(e.max_abs_error(), e.builtin_max_abs_error());
  EXPECT_EQ(e.max_rel_error(), e.builtin_max_rel_error());
  EXPECT_GT(e.max_abs_error(), 0);  // float32 rounding, seen against float64
  EXPECT_LE(e.max_rel_error(), 6.0e-8);
  EXPECT_EQ(r.builtin_backend(), "cuda");
  EXPECT_EQ(r.device(), "cuda:0");
  EXPECT_EQ(r.iterations(), 20);
  EXPECT_GT(r.copy_us(), 0);
  EXPECT_GT(r.builtin_us(), 0);
  EXPECT_GT(r.user_us(), 0);
  // The times are reported, not judged: speed is for the benchmarks to check
  // (the user kernel's time is its launch alone, not the sandbox's copies).
  std::printf("user_scale %.1f us, scale (%s) %.1f us, copy %.1f us, max rel err %.3g\n",
              r.user_us(), r.builtin_backend().c_str(), r.builtin_us(), r.copy_us(),
              e.max_rel_error());

  // On 4096 elements, as in FaultsFailTheirOwnRequestOnly: on 2^24 (65,536
  // blocks) the driver took past the 3-s timeout to report the trap (H100,
  // 2026-11-27), and the sandbox was replaced as a timeout instead.
  st = evaluate("trapper", &r, 4096);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL) << st.error_message();
  EXPECT_NE(st.error_message().find("trapper"), std::string::npos) << st.error_message();
  st = evaluate("user_scale", &r);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(UserKernelGpu, FaultsFailTheirOwnRequestOnly) {
  ASSERT_TRUE(Register(Spec("user_scale", "if (i < n) y[i] = x[i] * factor;")).ok());
  ASSERT_TRUE(Register(Spec("oob", "y[i + (1ll << 34)] = 1.0f;")).ok());
  ASSERT_TRUE(Register(Spec("trapper", "if (i == 0) __trap();")).ok());
  // Reads 64 MiB past its input: the sandbox maps the request's arena only.
  ASSERT_TRUE(Register(Spec("snoop", "if (i < n) y[i] = x[i + (64ll << 20)];")).ok());
  ASSERT_TRUE(Register(Spec("endless", "while (clock64() >= 0) {}")).ok());
  const std::string bytes = RandomFloats(1024);
  StartBuiltins();
  struct Case {
    const char* op;
    grpc::StatusCode code;
  } cases[] = {{"oob", grpc::StatusCode::INTERNAL},
               {"trapper", grpc::StatusCode::INTERNAL},
               {"snoop", grpc::StatusCode::INTERNAL},
               {"endless", grpc::StatusCode::DEADLINE_EXCEEDED}};
  for (const auto& c : cases) {
    v1::ExecuteResponse out;
    grpc::Status st = admin().Execute(Call(c.op, bytes, ""), &out);
    EXPECT_EQ(st.error_code(), c.code) << c.op << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.op), std::string::npos) << st.error_message();
    // The next user kernel runs on a fresh sandbox.
    ASSERT_TRUE(admin().Execute(Call("user_scale", bytes, ""), &out).ok()) << c.op;
  }
  StopBuiltins();
  EXPECT_EQ(errors_.load(), 0) << "of " << calls_.load() << " built-in calls";
  EXPECT_GT(calls_.load(), 0);
  v1::GetServerInfoResponse info;
  grpc::ClientContext ctx;
  ASSERT_TRUE(admin().stub()->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  for (const auto& dev : info.devices()) EXPECT_TRUE(dev.healthy()) << dev.id();
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
