#include "kernel_commands.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli_flags.h"
#include "credentials.h"
#include "tensor_util.h"

namespace kerneld::client {

namespace {

int Refused(const grpc::Status& st) {
  std::fprintf(stderr, "kernelctl: %s: %s\n", StatusName(st.error_code()).c_str(),
               st.error_message().c_str());
  if (std::string hint = TlsConnectionHint(st, DefaultSecurity()); !hint.empty())
    std::fprintf(stderr, "kernelctl: %s\n", hint.c_str());
  return 1;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return static_cast<bool>(f) || f.eof();
}

// "float32" -> "DTYPE_FLOAT32" in every dtypes list of inputs and outputs.
void SpellDTypes(google::protobuf::Struct* spec) {
  for (const char* side : {"inputs", "outputs"}) {
    auto it = spec->mutable_fields()->find(side);
    if (it == spec->mutable_fields()->end() || !it->second.has_list_value()) continue;
    for (auto& t : *it->second.mutable_list_value()->mutable_values()) {
      if (!t.has_struct_value()) continue;
      auto d = t.mutable_struct_value()->mutable_fields()->find("dtypes");
      if (d == t.mutable_struct_value()->mutable_fields()->end() || !d->second.has_list_value())
        continue;
      for (auto& v : *d->second.mutable_list_value()->mutable_values()) {
        if (!v.has_string_value() || v.string_value().rfind("DTYPE_", 0) == 0) continue;
        std::string up = "DTYPE_";
        for (char ch : v.string_value()) up += static_cast<char>(std::toupper(ch));
        v.set_string_value(up);
      }
    }
  }
}

v1::AttrValue ParseAttrValue(const std::string& v) {
  v1::AttrValue a;
  char* end = nullptr;
  if (v == "true" || v == "false") {
    a.set_b(v == "true");
  } else if (long long i = std::strtoll(v.c_str(), &end, 10); !v.empty() && *end == '\0') {
    a.set_i(i);
  } else if (double d = std::strtod(v.c_str(), &end); !v.empty() && *end == '\0') {
    a.set_f(d);
  } else {
    a.set_s(v);
  }
  return a;
}

std::string Resources(const google::protobuf::RepeatedPtrField<v1::KernelResources>& rs) {
  std::string out;
  for (const auto& r : rs) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "  %s %s: %d registers, %lld B shared, %lld B stack, spills %lld/%lld B\n",
                  r.arch().c_str(), r.function().c_str(), r.registers(),
                  static_cast<long long>(r.shared_bytes()), static_cast<long long>(r.stack_bytes()),
                  static_cast<long long>(r.spill_store_bytes()),
                  static_cast<long long>(r.spill_load_bytes()));
    out += line;
  }
  return out;
}

std::unique_ptr<v1::AdminService::Stub> Stub(KernelClient& c) {
  return v1::AdminService::NewStub(c.channel());
}

void Deadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

int Register(KernelClient& c, const KernelOptions& o) {
  std::string source, spec;
  if (!ReadFile(o.file, &source))
    return std::fprintf(stderr, "kernelctl: cannot read %s\n", o.file.c_str()), 2;
  if (!ReadFile(o.spec, &spec))
    return std::fprintf(stderr, "kernelctl: cannot read %s\n", o.spec.c_str()), 2;
  v1::RegisterKernelRequest req;
  std::string error;
  if (!ParseKernelSpec(spec, &req, &error))
    return std::fprintf(stderr, "kernelctl: %s: %s\n", o.spec.c_str(), error.c_str()), 2;
  req.set_cuda_source(source);
  if (!o.name.empty()) req.set_name(o.name);
  if (req.name().empty())
    return std::fprintf(stderr, "kernelctl: %s names no kernel (\"name\"; or --name)\n",
                        o.spec.c_str()),
           2;
  if (req.entry().empty()) req.set_entry(req.name());
  if (o.replace) req.mutable_options()->set_replace(true);
  if (!o.arch.empty()) req.mutable_options()->set_arch(o.arch);
  grpc::ClientContext ctx;
  Deadline(&ctx, 300);
  v1::RegisterKernelResponse resp;
  if (grpc::Status st = Stub(c)->RegisterKernel(&ctx, req, &resp); !st.ok()) return Refused(st);
  std::printf("registered %s (owner %s): %s in %.3f s\n", resp.name().c_str(), resp.owner().c_str(),
              resp.cache_hit() ? "from the JIT cache" : "compiled", resp.compile_seconds());
  std::fputs(Resources(resp.resources()).c_str(), stdout);
  if (!resp.compile_log().empty()) std::printf("compile log:\n%s\n", resp.compile_log().c_str());
  return 0;
}

int List(KernelClient& c, const KernelOptions& o) {
  grpc::ClientContext ctx;
  Deadline(&ctx, 60);
  v1::ListUserKernelsRequest req;
  req.set_all_principals(o.all);
  v1::ListUserKernelsResponse resp;
  if (grpc::Status st = Stub(c)->ListUserKernels(&ctx, req, &resp); !st.ok()) return Refused(st);
  if (resp.kernels().empty()) {
    std::printf("no user kernels\n");
    return 0;
  }
  std::printf("%-24s %-12s %-24s %8s %7s  %s\n", "name", "owner", "entry", "calls", "faults",
              "launch");
  for (const auto& k : resp.kernels()) {
    std::printf("%-24s %-12s %-24s %8lld %7lld  %s\n", k.kernel().name().c_str(), k.owner().c_str(),
                k.entry().c_str(), static_cast<long long>(k.calls()),
                static_cast<long long>(k.faults()), k.launch().c_str());
    std::fputs(Resources(k.resources()).c_str(), stdout);
  }
  return 0;
}

int Unregister(KernelClient& c, const KernelOptions& o) {
  grpc::ClientContext ctx;
  Deadline(&ctx, 60);
  v1::UnregisterKernelRequest req;
  req.set_name(o.name);
  v1::UnregisterKernelResponse resp;
  if (grpc::Status st = Stub(c)->UnregisterKernel(&ctx, req, &resp); !st.ok()) return Refused(st);
  std::printf("unregistered %s\n", o.name.c_str());
  return 0;
}

int Eval(KernelClient& c, const KernelOptions& o) {
  v1::EvaluateKernelRequest req;
  req.set_name(o.name);
  req.set_against(o.against);
  req.set_dtype(o.dtype);
  req.set_iterations(o.iterations);
  req.set_seed(o.seed);
  req.set_device(o.device);
  // --shapes x=16x4096 (NAME=SHAPE), or a bare shape for the op's first input.
  for (const std::string& s : o.shapes) {
    const auto eq = s.find('=');
    std::string input = eq == std::string::npos ? "" : s.substr(0, eq);
    std::vector<int64_t> dims;
    if (!ParseShape(eq == std::string::npos ? s : s.substr(eq + 1), &dims))
      return std::fprintf(stderr, "kernelctl: --shapes %s: expected NAME=AxB or AxB\n", s.c_str()),
             2;
    if (input.empty()) {
      v1::ListKernelsResponse lk;
      if (grpc::Status st = c.ListKernels(&lk, o.against); !st.ok()) return Refused(st);
      if (lk.kernels_size() != 1 || lk.kernels(0).inputs_size() == 0)
        return std::fprintf(stderr, "kernelctl: no op %s\n", o.against.c_str()), 2;
      input = lk.kernels(0).inputs(0).name();
    }
    auto& shape = (*req.mutable_shapes())[input];
    shape.clear_dims();
    for (int64_t d : dims) shape.add_dims(d);
  }
  for (const std::string& kv : o.attrs) {
    const auto eq = kv.find('=');
    (*req.mutable_attrs())[kv.substr(0, eq)] = ParseAttrValue(kv.substr(eq + 1));
  }
  grpc::ClientContext ctx;
  Deadline(&ctx, 600);
  v1::EvaluateKernelResponse resp;
  if (grpc::Status st = Stub(c)->EvaluateKernel(&ctx, req, &resp); !st.ok()) return Refused(st);
  std::printf("%s against %s (%s) on %s, %s, median of %d runs, L2 read-flushed\n", o.name.c_str(),
              o.against.c_str(), resp.builtin_backend().c_str(), resp.device().c_str(),
              o.dtype.c_str(), resp.iterations());
  std::printf("%-12s %14s %14s %14s %14s\n", "output", "max abs err", "max rel err", "built-in abs",
              "built-in rel");
  for (const auto& e : resp.errors())
    std::printf("%-12s %14.3g %14.3g %14.3g %14.3g\n", e.output().c_str(), e.max_abs_error(),
                e.max_rel_error(), e.builtin_max_abs_error(), e.builtin_max_rel_error());
  std::printf("%-12s %10s %10s %10s %12s\n", "time (us)", o.name.substr(0, 10).c_str(),
              o.against.substr(0, 10).c_str(), "copy", "vs built-in");
  std::printf("%-12s %10.2f %10.2f %10.2f %11.2fx\n", "", resp.user_us(), resp.builtin_us(),
              resp.copy_us(), resp.builtin_us() > 0 ? resp.user_us() / resp.builtin_us() : 0);
  if (!o.json.empty()) {
    google::protobuf::util::JsonPrintOptions opt;
    opt.always_print_primitive_fields = true;
    opt.preserve_proto_field_names = true;
    std::string rq, rs;
    (void)google::protobuf::util::MessageToJsonString(req, &rq, opt);
    (void)google::protobuf::util::MessageToJsonString(resp, &rs, opt);
    std::ofstream f(o.json);
    f << "{\"request\":" << rq << ",\"response\":" << rs << "}\n";
    if (!f) return std::fprintf(stderr, "kernelctl: cannot write %s\n", o.json.c_str()), 2;
  }
  return 0;
}

}  // namespace

bool ParseKernelSpec(const std::string& json, v1::RegisterKernelRequest* req, std::string* error) {
  google::protobuf::Struct spec;
  if (auto st = google::protobuf::util::JsonStringToMessage(json, &spec); !st.ok()) {
    *error = "not a JSON object: " + std::string(st.message());
    return false;
  }
  SpellDTypes(&spec);
  std::string normalized;
  (void)google::protobuf::util::MessageToJsonString(spec, &normalized);
  if (auto st = google::protobuf::util::JsonStringToMessage(normalized, req); !st.ok()) {
    *error = std::string(st.message());
    return false;
  }
  if (!req->cuda_source().empty()) {
    *error = "the source comes from the .cu file, not the spec's cuda_source";
    return false;
  }
  return true;
}

CLI::App* AddKernelCommand(CLI::App& app, KernelOptions* o) {
  CLI::App* k = app.add_subcommand(
      "kernel", "user kernels: register CUDA source, list, unregister, evaluate against an op");
  k->require_subcommand(1);
  o->reg = k->add_subcommand("register", "compile FILE.cu with SPEC.json and serve it as an op");
  o->reg->add_option("FILE", o->file, "the CUDA source")->type_name("FILE.cu")->required();
  o->reg->add_option("--spec", o->spec, "the spec (docs/user-kernels.md)")
      ->type_name("SPEC.json")
      ->required();
  o->reg->add_option("--name", o->name, "the op's name instead of the spec's")->type_name("NAME");
  o->reg->add_option("--arch", o->arch, "compile for this architecture only")->type_name("sm_XY");
  o->reg->add_flag("--replace", o->replace, "replace your kernel of this name");
  o->list = k->add_subcommand("list", "your user kernels with their resources and counts");
  o->list->add_flag("--all", o->all, "every principal's (admin)");
  o->unreg = k->add_subcommand("unregister", "remove your kernel NAME");
  o->unreg->add_option("NAME", o->name, "the kernel")->type_name("NAME")->required();
  o->eval = k->add_subcommand(
      "eval", "check NAME against a built-in op's float64 reference and time both (GPU)");
  o->eval->add_option("NAME", o->name, "the user kernel")->type_name("NAME")->required();
  o->eval->add_option("--against", o->against, "the built-in op (scale)")
      ->type_name("OP")
      ->required();
  o->eval
      ->add_option("--shapes", o->shapes,
                   "inputs' shapes: NAME=AxB each, or AxB for the op's first input")
      ->type_name("SHAPE")
      ->delimiter(',')
      ->required();
  o->eval->add_option("--dtype", o->dtype, "the first input's dtype")
      ->type_name("DTYPE")
      ->check(DTypeText())
      ->capture_default_str();
  o->eval->add_option("--attr", o->attrs, "an attr, both ops'")
      ->type_name("K=V")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            const auto eq = s.find('=');
            return eq == std::string::npos || eq == 0 ? "expected K=V, got '" + s + "'" : "";
          },
          ""));
  o->eval->add_option(Names("--iterations"), o->iterations, "timed runs")
      ->type_name("N")
      ->check(IntAtLeast(1))
      ->capture_default_str();
  o->eval->add_option("--seed", o->seed, "the inputs' random seed")->capture_default_str();
  o->eval->add_option("--device", o->device, "cuda:N (default: the first GPU)")
      ->type_name("cuda:N");
  o->eval->add_option("--json", o->json, "write the request and result as one JSON record")
      ->type_name("FILE");
  return k;
}

int KernelCommand(KernelClient& c, const KernelOptions& o) {
  if (!c.init_status().ok()) return Refused(c.init_status());
  if (o.reg->parsed()) return Register(c, o);
  if (o.list->parsed()) return List(c, o);
  if (o.unreg->parsed()) return Unregister(c, o);
  return Eval(c, o);
}

}  // namespace kerneld::client
