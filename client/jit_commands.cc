#include "jit_commands.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "cli_flags.h"
#include "credentials.h"

namespace kerneld::client {

namespace {

int Refused(const grpc::Status& st) {
  std::fprintf(stderr, "kernelctl: %s: %s\n", StatusName(st.error_code()).c_str(),
               st.error_message().c_str());
  if (std::string hint = TlsConnectionHint(st, DefaultSecurity()); !hint.empty())
    std::fprintf(stderr, "kernelctl: %s\n", hint.c_str());
  return 1;
}

// "16x4096" -> {16, 4096}.
bool ParseDims(const std::string& text, std::vector<int64_t>* out) {
  std::stringstream ss(text);
  std::string d;
  while (std::getline(ss, d, 'x')) {
    if (d.empty() || d.size() > 12 || d.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out->push_back(std::stoll(d));
  }
  return !out->empty();
}

}  // namespace

CLI::App* AddJitCommand(CLI::App& app, JitOptions* o) {
  CLI::App* j = app.add_subcommand("jit", "the nvrtc backend: warm its cache, list it");
  j->require_subcommand(1);
  o->warm = j->add_subcommand(
      "warm", "compile now the kernel a request of this op, dtype and shape will run on nvrtc");
  o->warm->add_option("--op", o->op, "the op (rmsnorm)")->type_name("OP")->required();
  o->warm->add_option("--dtype", o->dtype, "its dtype")->type_name("DTYPE")->capture_default_str();
  o->warm->add_option("--shape", o->shape, "its first input's shape (16x4096)")
      ->type_name("AxB")
      ->required();
  o->warm
      ->add_option("--arch", o->arch,
                   "compile for this architecture (sm_90) instead of the daemon's GPUs'")
      ->type_name("sm_XY");
  o->warm
      ->add_option("--sm-count,--sm_count", o->sm_count,
                   "SMs of the target GPU, for its launch plan (with --arch)")
      ->type_name("N")
      ->check(IntAtLeast(0));
  o->list = j->add_subcommand("list", "the JIT cache and the kernels the daemon compiled");
  return j;
}

int JitCommand(KernelClient& c, const JitOptions& o) {
  if (!c.init_status().ok()) return Refused(c.init_status());
  auto stub = v1::JitService::NewStub(c.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
  if (o.warm->parsed()) {
    v1::WarmJitRequest req;
    req.set_op(o.op);
    req.set_dtype(o.dtype);
    std::vector<int64_t> dims;
    if (!ParseDims(o.shape, &dims))
      return std::fprintf(stderr, "kernelctl: --shape %s: expected AxB (16x4096)\n",
                          o.shape.c_str()),
             2;
    for (int64_t d : dims) req.add_shape(d);
    req.set_arch(o.arch);
    req.set_sm_count(o.sm_count);
    v1::WarmJitResponse resp;
    if (grpc::Status st = stub->WarmJit(&ctx, req, &resp); !st.ok()) return Refused(st);
    for (const auto& k : resp.kernels())
      std::printf("%s %s %s %.3f s, %d GPUs loaded  key %s\n  %s\n", k.arch().c_str(),
                  k.op().c_str(), k.cache_hit() ? "cached" : "compiled", k.compile_seconds(),
                  k.devices_loaded(), k.key().c_str(), k.kernel().c_str());
    return 0;
  }
  v1::ListJitCacheRequest req;
  v1::ListJitCacheResponse resp;
  if (grpc::Status st = stub->ListJitCache(&ctx, req, &resp); !st.ok()) return Refused(st);
  std::printf("mode %s, nvrtc %s%s\n", resp.mode().c_str(),
              resp.nvrtc_version().empty() ? "-" : resp.nvrtc_version().c_str(),
              resp.status().empty() ? "" : ("; not serving: " + resp.status()).c_str());
  std::string ops;
  for (const auto& op : resp.ops()) ops += (ops.empty() ? "" : ", ") + op;
  std::printf("ops with a JIT form: %s\n", ops.empty() ? "none in this build" : ops.c_str());
  std::printf("cache %s%s\n", resp.cache_dir().empty() ? "-" : resp.cache_dir().c_str(),
              resp.cache_status().empty() ? "" : (" (off: " + resp.cache_status() + ")").c_str());
  std::printf("%-64s %10s %-20s %s\n", "key", "bytes", "used (UTC)", "kernel");
  for (const auto& e : resp.entries()) {
    const std::time_t t = static_cast<std::time_t>(e.used_unix_ns() / 1000000000);
    char when[32] = "-";
    std::tm tm{};
    if (gmtime_r(&t, &tm) != nullptr) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    std::printf("%-64s %10lld %-20s %s\n", e.key().c_str(), static_cast<long long>(e.bytes()), when,
                e.kernel().c_str());
  }
  if (resp.kernels_size() > 0) std::printf("kernels this daemon has seen:\n");
  for (const auto& k : resp.kernels())
    std::printf("  %-9s %-18s %d GPUs  %s%s\n", k.state().c_str(), k.op().c_str(),
                k.devices_loaded(), k.kernel().c_str(),
                k.error().empty() ? "" : ("  (" + k.error() + ")").c_str());
  return 0;
}

}  // namespace kerneld::client
