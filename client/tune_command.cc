#include "tune_command.h"

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

v1::AttrValue AttrOf(const std::string& type, const std::string& v, bool* ok) {
  v1::AttrValue a;
  char* end = nullptr;
  *ok = !v.empty();
  if (type == "bool") {
    *ok = v == "true" || v == "false" || v == "1" || v == "0";
    a.set_b(v == "true" || v == "1");
  } else if (type == "int") {
    a.set_i(std::strtoll(v.c_str(), &end, 10));
    *ok = *ok && *end == '\0';
  } else if (type == "float") {
    a.set_f(std::strtod(v.c_str(), &end));
    *ok = *ok && *end == '\0';
  } else {
    a.set_s(v);
  }
  return a;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);)
    if (!x.empty()) out.push_back(x);
  return out;
}

// "a=16x4096,b=4096x4096,transpose_b=true": inputs take shapes, attrs
// values, by the op's schema. "" or why not.
std::string ParseProblem(const v1::KernelInfo& k, const std::string& text, v1::TuneProblem* p) {
  for (const std::string& item : Split(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return "expected NAME=VALUE, got '" + item + "'";
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    bool found = false;
    for (const auto& in : k.inputs()) {
      if (in.name() != name) continue;
      std::vector<int64_t> shape;
      if (!ParseShape(value, &shape)) return "input '" + name + "': bad shape '" + value + "'";
      for (int64_t d : shape) (*p->mutable_shapes())[name].add_dims(d);
      found = true;
    }
    for (const auto& a : k.attrs()) {
      if (a.name() != name) continue;
      bool ok = false;
      (*p->mutable_attrs())[name] = AttrOf(a.type(), value, &ok);
      if (!ok) return "attr '" + name + "' is " + a.type() + ", not '" + value + "'";
      found = true;
    }
    if (!found) return k.name() + " has no input or attr '" + name + "'";
  }
  for (const auto& in : k.inputs())
    if (!p->shapes().count(in.name())) return "input '" + in.name() + "' needs a shape";
  return "";
}

}  // namespace

CLI::App* AddTuneCommand(CLI::App& app, TuneOptions* o) {
  CLI::App* t = app.add_subcommand(
      "tune",
      "offline sweep: time every eligible implementation of OP on the daemon's devices (L2 "
      "read-flushed GPU medians; CPU wall-clock medians) and merge the medians into its tuning "
      "table and --tuning_file (admin principals only)");
  t->add_option("OP", o->op, "the op (kernelctl list names them)")->type_name("OP")->required();
  t->add_option("--dtype", o->dtypes,
                "the first input's dtypes, one sweep each (float16,bfloat16,float32); the other "
                "inputs take it where they can")
      ->type_name("DTYPE[,DTYPE...]")
      ->capture_default_str();
  t->add_option("--shapes", o->shapes,
                "one problem: every input's shape and, optionally, attrs, as NAME=VALUE,... "
                "(gemm: a=16x4096,b=4096x4096,transpose_b=true); ';' separates problems; "
                "repeatable")
      ->type_name("PROBLEM[;PROBLEM...]")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  t->add_option(Names("--shapes-file"), o->shapes_file,
                "more problems, one a line in --shapes' form ('#' starts a comment)")
      ->type_name("FILE");
  t->add_option("--attr", o->attrs, "attr K=V for every problem (repeatable)")
      ->type_name("K=V")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  t->add_option("--repeats", o->repeats, "timed runs per implementation (median)")
      ->type_name("N")
      ->check(IntAtLeast(1))
      ->capture_default_str();
  t->add_option("--device", o->device,
                "only this device (cpu, cuda:1); default: each GPU model once, or the CPU on a "
                "host without GPUs")
      ->type_name("DEVICE");
  t->add_option("--seed", o->seed, "random seed of the inputs")
      ->type_name("N")
      ->check(IntAtLeast(0))
      ->capture_default_str();
  t->add_option("--timeout", o->timeout_s, "seconds the whole sweep may take")
      ->type_name("S")
      ->check(IntAtLeast(1))
      ->capture_default_str();
  return t;
}

int TuneCommand(KernelClient& c, const TuneOptions& o) {
  if (!c.init_status().ok()) return Refused(c.init_status());
  v1::ListKernelsResponse lk;
  if (auto st = c.ListKernels(&lk, o.op); !st.ok()) return Refused(st);
  if (lk.kernels_size() == 0)
    return std::fprintf(stderr, "kernelctl: no op '%s'\n", o.op.c_str()), 2;
  const v1::KernelInfo& k = lk.kernels(0);
  v1::TuneRequest req;
  req.set_op(o.op);
  for (const std::string& d : Split(o.dtypes, ',')) req.add_dtypes(d);
  req.set_repeats(o.repeats);
  req.set_device(o.device);
  req.set_seed(o.seed);
  std::vector<std::string> texts;
  for (const std::string& s : o.shapes)
    for (const std::string& p : Split(s, ';')) texts.push_back(p);
  if (!o.shapes_file.empty()) {
    std::ifstream f(o.shapes_file);
    if (!f) return std::fprintf(stderr, "kernelctl: cannot read %s\n", o.shapes_file.c_str()), 2;
    for (std::string line; std::getline(f, line);) {
      line = line.substr(0, line.find('#'));
      line.erase(0, line.find_first_not_of(" \t"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (!line.empty()) texts.push_back(line);
    }
  }
  if (texts.empty())
    return std::fprintf(stderr, "kernelctl: tune needs --shapes or --shapes-file\n"), 2;
  for (const std::string& t : texts) {
    std::string err = ParseProblem(k, t, req.add_problems());
    if (!err.empty())
      return std::fprintf(stderr, "kernelctl: --shapes %s: %s\n", t.c_str(), err.c_str()), 2;
  }
  v1::TuneProblem common;
  for (const std::string& kv : o.attrs) {
    std::string err = ParseProblem(k, kv, &common);
    if (!common.shapes().empty())
      err = "an input; --attr names attrs (shapes go in --shapes)";
    if (!err.empty() && err.find("needs a shape") == std::string::npos)
      return std::fprintf(stderr, "kernelctl: --attr %s: %s\n", kv.c_str(), err.c_str()), 2;
  }
  *req.mutable_attrs() = common.attrs();
  auto stub = v1::TuningService::NewStub(c.channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(o.timeout_s));
  v1::TuneResponse resp;
  if (grpc::Status st = stub->Tune(&ctx, req, &resp); !st.ok()) return Refused(st);
  for (const auto& r : resp.results()) {
    std::printf("%s on %s", r.problem().c_str(), r.device().c_str());
    const v1::TuningBucket& b = r.bucket();
    if (!b.bucket().empty()) std::printf(" [%s %s]", b.dtypes().c_str(), b.bucket().c_str());
    std::printf(":");
    for (int i = 0; i < b.times_size(); ++i)
      std::printf("%s %s %.2f us", i ? "," : "", b.times(i).backend().c_str(),
                  static_cast<double>(b.times(i).median_ns()) * 1e-3);
    if (!b.chosen().empty()) std::printf(" -> %s", b.chosen().c_str());
    if (!r.error().empty()) std::printf(" (%s)", r.error().c_str());
    std::printf("\n");
  }
  std::printf("%d rows merged into the tuning table (--tuning=%s)%s%s\n", resp.rows_merged(),
              resp.tuning_mode().c_str(),
              resp.tuning_file().empty() ? "; no --tuning_file" : "; written to ",
              resp.tuning_file().c_str());
  return 0;
}

}  // namespace kerneld::client
