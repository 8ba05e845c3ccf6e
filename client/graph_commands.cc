#include "graph_commands.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "graph_builder.h"
#include "input_gen.h"
#include "kerneld/percentile.h"
#include "tensor_util.h"

namespace kerneld::client {

namespace {

int Refused(const grpc::Status& st) {
  std::fprintf(stderr, "kernelctl: %s: %s\n", StatusName(st.error_code()).c_str(),
               st.error_message().c_str());
  return 1;
}

std::string ShapeText(const v1::Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.shape_size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape(i));
  return s + "]";
}

// Fills graph input `name` (given a dtype and shape but no data) the way
// `kernelctl run` fills the input of the first step that reads it.
bool Generate(const std::string& name, const v1::ExecuteGraphRequest& req,
              const std::map<std::string, v1::KernelInfo>& kernels, std::mt19937_64& rng,
              v1::Tensor* t, std::string* error) {
  if (t->dtype() == v1::DTYPE_UNSPECIFIED) {
    *error = "graph input '" + name + "' has no data and no dtype: give \"dtype\" and \"shape\"";
    return false;
  }
  const auto dt = static_cast<DType>(t->dtype());
  std::vector<int64_t> shape(t->shape().begin(), t->shape().end());
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 30) / d)) {
      *error = "graph input '" + name + "': shape " + ShapeText(*t) + " is too large to generate";
      return false;
    }
    n *= d;
  }
  v1::InputGeneration gen;
  for (const v1::GraphStep& s : req.steps()) {
    auto k = kernels.find(s.op());
    if (k == kernels.end()) continue;
    for (const auto& [in, bound] : s.inputs()) {
      if (bound != name) continue;
      for (int i = 0; i < k->second.inputs_size(); ++i)
        if (k->second.inputs(i).name() == in) gen = GenerationOf(k->second, i);
      goto found;
    }
  }
found:
  HostTensor h;
  switch (gen.kind()) {
    case v1::InputGeneration::PROBABILITIES: {
      h = Random(dt, shape, rng, 0.05, 1);
      const size_t row =
          shape.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(shape.back(), 1));
      for (size_t at = 0; at < h.values.size(); at += row) {
        double sum = 0;
        for (size_t j = at; j < at + row && j < h.values.size(); ++j) sum += h.values[j];
        for (size_t j = at; j < at + row && j < h.values.size(); ++j)
          h.values[j] = RoundTo(dt, h.values[j] / sum);
      }
      break;
    }
    case v1::InputGeneration::INDEX:
      // The bound is a dim of another input: index 0 is inside every one.
      h = Random(dt, shape, rng, 0, 1);
      break;
    default:
      h = IsFloating(dt) ? Random(dt, shape, rng) : Random(dt, shape, rng, 0, 2);
  }
  ToProto(h, t);
  return true;
}

// The same steps as Execute calls, one by one on `device`: every step
// output by "<step>.<output>" (and "<step>" for its first), for --check.
bool RunOneByOne(KernelClient& c, const v1::ExecuteGraphRequest& req,
                 const std::map<std::string, v1::KernelInfo>& kernels, const std::string& device,
                 std::map<std::string, v1::Tensor>* values, std::string* why) {
  for (const auto& [name, t] : req.inputs()) (*values)[name] = t;
  for (int i = 0; i < req.steps_size(); ++i) {
    const v1::GraphStep& s = req.steps(i);
    const std::string step = s.name().empty() ? "step" + std::to_string(i) : s.name();
    v1::ExecuteRequest one;
    one.set_op(s.op());
    one.set_device(device);
    one.set_backend(s.backend());
    for (const auto& [in, bound] : s.inputs()) {
      auto v = values->find(bound);
      if (v == values->end()) return *why = "step " + step + ": no value " + bound, false;
      (*one.mutable_inputs())[in] = v->second;
    }
    for (const auto& [k, a] : s.attrs()) (*one.mutable_attrs())[k] = a;
    v1::ExecuteResponse r;
    if (grpc::Status st = c.Execute(one, &r); !st.ok())
      return *why = "step " + step + " (" + s.op() + ") alone: " + st.error_message(), false;
    const auto k = kernels.find(s.op());
    for (const auto& [out, t] : r.outputs()) (*values)[step + "." + out] = t;
    if (k != kernels.end() && k->second.outputs_size() > 0)
      (*values)[step] = r.outputs().at(k->second.outputs(0).name());
  }
  return true;
}

}  // namespace

CLI::App* AddGraphCommand(CLI::App& app, GraphOptions* o) {
  CLI::App* g = app.add_subcommand(
      "graph",
      "run a request graph described in JSON (ExecuteGraphRequest's JSON form, "
      "docs/graphs.md); inputs with a dtype and shape but no data are drawn at random like "
      "kernelctl run draws them");
  g->add_option("FILE", o->file, "the graph, JSON")->type_name("FILE")->required();
  g->add_option("--device", o->device, "run it here (cpu, cuda:0), overriding the file's")
      ->type_name("DEVICE");
  g->add_option("--repeat", o->repeat, "calls per client (latency percentiles)")
      ->type_name("N")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  g->add_option("--concurrency", o->concurrency,
                "clients calling at once, each on its own connection (throughput)")
      ->type_name("N")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  g->add_flag("--check", o->check,
              "also run the steps one by one with Execute on the same device and compare the "
              "inline outputs bit for bit");
  g->add_option("--seed", o->seed, "seed of the random inputs")
      ->type_name("N")
      ->capture_default_str();
  return g;
}

int GraphCommand(KernelClient& c, const std::string& target, const GraphOptions& o) {
  if (!c.init_status().ok()) return Refused(c.init_status());
  std::ifstream f(o.file);
  if (!f) return std::fprintf(stderr, "kernelctl: cannot read %s\n", o.file.c_str()), 2;
  std::stringstream text;
  text << f.rdbuf();
  v1::ExecuteGraphRequest req;
  if (auto st = google::protobuf::util::JsonStringToMessage(text.str(), &req); !st.ok())
    return std::fprintf(stderr, "kernelctl: %s is not an ExecuteGraphRequest in JSON: %s\n",
                        o.file.c_str(), std::string(st.message()).c_str()),
           2;
  if (!o.device.empty()) req.set_device(o.device);

  v1::ListKernelsResponse lk;
  if (grpc::Status st = c.ListKernels(&lk); !st.ok()) return Refused(st);
  std::map<std::string, v1::KernelInfo> kernels;
  for (const auto& k : lk.kernels()) kernels[k.name()] = k;
  std::mt19937_64 rng(o.seed);
  bool all_inline = true;
  // In name order (a protobuf map's own order varies by process), so a
  // --seed draws the same inputs every time.
  std::vector<std::string> names;
  for (const auto& [name, t] : req.inputs()) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    v1::Tensor& t = (*req.mutable_inputs())[name];
    if (t.has_buffer()) {
      all_inline = false;
      continue;
    }
    if (t.data_case() == v1::Tensor::kInlineData) continue;
    std::string error;
    if (!Generate(name, req, kernels, rng, &t, &error))
      return std::fprintf(stderr, "kernelctl: %s\n", error.c_str()), 2;
  }

  // Every client its own channel (a local subchannel pool: its own
  // connection), `repeat` calls each, one in flight.
  const int clients = o.concurrency;
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::vector<std::vector<double>> server(static_cast<size_t>(clients));
  std::vector<grpc::Status> failed(static_cast<size_t>(clients));
  v1::ExecuteGraphResponse resp;
  auto client_loop = [&](int id, KernelClient& kc, v1::ExecuteGraphResponse* last) {
    for (int i = 0; i < o.repeat; ++i) {
      v1::ExecuteGraphResponse r;
      const auto t0 = std::chrono::steady_clock::now();
      grpc::Status st = RunGraph(kc, req, &r);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        failed[static_cast<size_t>(id)] = st;
        return;
      }
      lat[static_cast<size_t>(id)].push_back(us);
      server[static_cast<size_t>(id)].push_back(static_cast<double>(r.info().total_ns()) / 1e3);
      if (last != nullptr && i + 1 == o.repeat) *last = std::move(r);
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (clients == 1) {
    client_loop(0, c, &resp);
  } else {
    std::vector<std::unique_ptr<KernelClient>> kcs;
    for (int i = 0; i < clients; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetMaxReceiveMessageSize(c.options().max_message_mb << 20);
      args.SetMaxSendMessageSize(c.options().max_message_mb << 20);
      std::string error;
      auto ch = MakeChannel(target, args, c.options().security.value_or(DefaultSecurity()), &error);
      if (ch == nullptr) return std::fprintf(stderr, "kernelctl: %s\n", error.c_str()), 2;
      // Connected before the clients start, as perf does: with gRPC before
      // 1.61 (grpc/grpc#35064) a connect that is still in progress can be
      // taken for a failure ("No such file or directory"), and a call made
      // then fails UNAVAILABLE; waiting for READY rides out the retry.
      if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
        return std::fprintf(stderr, "kernelctl graph: cannot connect to %s\n", target.c_str()), 1;
      kcs.push_back(std::make_unique<KernelClient>(ch, c.options()));
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i)
      threads.emplace_back(client_loop, i, std::ref(*kcs[static_cast<size_t>(i)]),
                           i == 0 ? &resp : nullptr);
    for (auto& t : threads) t.join();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const grpc::Status& st : failed)
    if (!st.ok()) return Refused(st);

  std::vector<double> all, all_server;
  for (size_t i = 0; i < lat.size(); ++i) {
    all.insert(all.end(), lat[i].begin(), lat[i].end());
    all_server.insert(all_server.end(), server[i].begin(), server[i].end());
  }
  for (const auto& [name, t] : resp.outputs()) {
    std::printf("%s: %s %s", name.c_str(), DTypeName(static_cast<DType>(t.dtype())).data(),
                ShapeText(t).c_str());
    HostTensor h;
    if (t.has_buffer()) {
      std::printf(" written to buffer %s at %llu\n", t.buffer().buffer_id().c_str(),
                  static_cast<unsigned long long>(t.buffer().offset()));
    } else if (FromProto(t, &h)) {
      std::printf(" =");
      for (size_t i = 0; i < std::min<size_t>(h.values.size(), 6); ++i)
        std::printf(" %.6g", h.values[i]);
      std::printf("%s\n", h.values.size() > 6 ? " ..." : "");
    } else {
      std::printf("\n");
    }
  }
  const int steps = req.steps_size();
  std::printf(
      "graph of %d steps on %s/%s: %zu calls, client p50 %.1f us p99 %.1f us; server total p50 "
      "%.1f us; intermediates %lld bytes\n",
      steps, resp.info().backend().c_str(), resp.info().device().c_str(), all.size(),
      Percentile(all, 0.5), Percentile(all, 0.99), Percentile(all_server, 0.5),
      static_cast<long long>(resp.intermediate_bytes()));
  if (o.repeat > 1 && !lat[0].empty()) {
    // The first call of a new graph on a GPU also captures it (docs/graphs.md).
    std::vector<double> rest(lat[0].begin() + 1, lat[0].end());
    std::printf("first call %.1f us, later calls p50 %.1f us\n", lat[0][0], Percentile(rest, 0.5));
  }
  if (clients > 1 || o.repeat > 1)
    std::printf("%d client%s: %.0f graphs/s, %.0f steps/s in %.3f s\n", clients,
                clients == 1 ? "" : "s", static_cast<double>(all.size()) / secs,
                static_cast<double>(all.size()) * steps / secs, secs);

  if (!o.check) return 0;
  if (!all_inline) {
    std::printf("check: skipped (inputs in buffers)\n");
    return 0;
  }
  std::map<std::string, v1::Tensor> values;
  std::string why;
  if (!RunOneByOne(c, req, kernels, resp.info().device(), &values, &why))
    return std::fprintf(stderr, "kernelctl: check: %s\n", why.c_str()), 1;
  // The declared outputs' sources, or the last step's outputs by name.
  std::map<std::string, std::string> sources;
  for (const auto& out : req.outputs())
    if (!out.has_buffer()) sources[out.name()] = out.source();
  if (req.outputs_size() == 0 && steps > 0) {
    const std::string last = req.steps(steps - 1).name().empty()
                                 ? "step" + std::to_string(steps - 1)
                                 : req.steps(steps - 1).name();
    for (const auto& [name, t] : resp.outputs()) sources[name] = last + "." + name;
  }
  int differ = 0;
  for (const auto& [name, source] : sources) {
    auto got = resp.outputs().find(name);
    auto want = values.find(source);
    if (got == resp.outputs().end() || want == values.end()) continue;
    if (got->second.inline_data() != want->second.inline_data()) {
      ++differ;
      std::printf("check: output %s differs from the ops one by one\n", name.c_str());
    }
  }
  std::printf("check: %zu outputs %s the ops called one by one on %s\n", sources.size(),
              differ == 0 ? "equal, bit for bit," : "compared with", resp.info().device().c_str());
  return differ == 0 ? 0 : 1;
}

}  // namespace kerneld::client
