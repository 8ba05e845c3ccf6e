#include "service/tuning_service.h"

#include <algorithm>
#include <map>
#include <random>

#include "auth/authenticator.h"
#include "devices/cpu_worker.h"
#include "kerneld/input_gen.h"
#include "kerneld/size.h"
#include "scheduler/scheduler.h"
#include "scheduler/tune_timing.h"
#include "scheduler/tuning_file.h"
#include "scheduler/tuning_setup.h"
#include "service/kernel_service.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

constexpr int kMaxProblems = 4096;
constexpr int kMaxRepeats = 1000;
constexpr int kMaxDTypes = 16;
// A problem's inputs are made on the host first (then copied to a GPU).
constexpr int64_t kMaxProblemBytes = int64_t{4} << 30;

std::string ShapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string AttrText(const AttrValue& v) {
  if (const double* f = std::get_if<double>(&v)) {
    std::string s = std::to_string(*f);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  return "?";
}

// One problem of the request, checked: every input's shape, its attrs.
struct Problem {
  std::map<std::string, Shape> shapes;
  AttrMap attrs;
};

// The devices a sweep times on: the named one; else each GPU model's first
// device; else (no GPU) the CPU.
Status SweepDevices(const DeviceManager& devices, const std::string& name,
                    std::vector<DeviceWorker*>* out) {
  if (!name.empty()) {
    Status err;
    DeviceWorker* w = devices.Find(name, &err);
    if (w == nullptr) return err;
    out->push_back(w);
    return Status::Ok();
  }
  std::vector<std::string> models;
  for (const auto& w : devices.workers()) {
    if (!w->info().device.is_cuda() || !w->healthy()) continue;
    const std::string m = Scheduler::ModelOf(w->info());
    if (std::find(models.begin(), models.end(), m) != models.end()) continue;
    models.push_back(m);
    out->push_back(w.get());
  }
  if (out->empty())
    for (const auto& w : devices.workers())
      if (w->info().device.is_cpu()) out->push_back(w.get());
  if (out->empty()) return FailedPrecondition("Tune: no healthy device to time on");
  return Status::Ok();
}

}  // namespace

Status TuneHandler::Tune(const Identity& who, const v1::TuneRequest& req,
                         const std::function<bool()>& cancelled, v1::TuneResponse* resp) {
  KERNELD_RETURN_IF_ERROR(Authenticator::RequireAdmin(who, "Tune (it occupies the device)"));
  const OpDef* op = OpRegistry::Global().Find(req.op());
  if (op == nullptr || (op->test_only() && !cfg_.enable_test_ops))
    return NotFound("Tune: no op " + Quote(req.op()) + " (kernelctl list names them)");
  if (op->inputs.empty()) return InvalidArgument("Tune: " + op->name + " has no inputs to size");
  // dtypes
  std::vector<DType> dtypes;
  if (req.dtypes_size() > kMaxDTypes)
    return InvalidArgument("Tune: at most " + std::to_string(kMaxDTypes) + " dtypes");
  for (const std::string& d : req.dtypes()) {
    auto dt = ParseDType(d);
    if (!dt) return InvalidArgument("Tune: unknown dtype " + Quote(d));
    if (!op->inputs[0].dtypes.Contains(*dt))
      return InvalidArgument("Tune: " + op->name + " input '" + op->inputs[0].name +
                             "' does not take " + std::string(DTypeName(*dt)));
    dtypes.push_back(*dt);
  }
  if (dtypes.empty()) {
    if (!op->inputs[0].dtypes.Contains(DType::kFloat32))
      return InvalidArgument("Tune: " + op->name + " input '" + op->inputs[0].name +
                             "' does not take float32; name its dtypes");
    dtypes.push_back(DType::kFloat32);
  }
  // repeats, attrs, problems
  if (req.repeats() < 0 || req.repeats() > kMaxRepeats)
    return InvalidArgument("Tune: repeats is 1-" + std::to_string(kMaxRepeats) + " (0: 30)");
  const int repeats = req.repeats() == 0 ? 30 : req.repeats();
  AttrMap common;
  // Pairs, not structured bindings: clang before 16 cannot capture those.
  for (const auto& kv : req.attrs()) {
    const std::string& n = kv.first;
    KERNELD_RETURN_IF_ERROR(
        FromProto([&] { return "Tune: attr '" + n + "'"; }, kv.second, &common[n]));
  }
  if (req.problems_size() == 0)
    return InvalidArgument("Tune: no problems (each names every input's shape)");
  if (req.problems_size() > kMaxProblems)
    return InvalidArgument("Tune: at most " + std::to_string(kMaxProblems) + " problems");
  std::vector<Problem> problems;
  for (int pi = 0; pi < req.problems_size(); ++pi) {
    const v1::TuneProblem& tp = req.problems(pi);
    const std::string at = "Tune: problem " + std::to_string(pi + 1);
    Problem p;
    for (const auto& kv : tp.shapes()) {
      const std::string& n = kv.first;
      if (std::none_of(op->inputs.begin(), op->inputs.end(),
                       [&](const InputDef& in) { return in.name == n; }))
        return InvalidArgument(at + ": " + op->name + " has no input " + Quote(n));
    }
    for (const InputDef& in : op->inputs) {
      auto it = tp.shapes().find(in.name);
      if (it == tp.shapes().end())
        return InvalidArgument(at + ": input '" + in.name + "' needs a shape");
      Shape s(it->second.dims().begin(), it->second.dims().end());
      for (DType dt : dtypes)
        KERNELD_RETURN_IF_ERROR(
            CheckTensorSize(at + ": input '" + in.name + "'", InputDType(in, dt), s));
      p.shapes[in.name] = std::move(s);
    }
    int64_t total = 0;
    for (const InputDef& in : op->inputs)
      total += Numel(p.shapes[in.name]) * 8;  // the widest dtype a sweep may take
    if (total > kMaxProblemBytes)
      return InvalidArgument(at + ": its inputs take more than " + HumanBytes(kMaxProblemBytes));
    p.attrs = common;
    for (const auto& kv : tp.attrs()) {
      const std::string& n = kv.first;
      KERNELD_RETURN_IF_ERROR(
          FromProto([&] { return at + ": attr '" + n + "'"; }, kv.second, &p.attrs[n]));
    }
    problems.push_back(std::move(p));
  }
  std::vector<DeviceWorker*> targets;
  KERNELD_RETURN_IF_ERROR(SweepDevices(devices_, req.device(), &targets));

  std::unique_lock<std::mutex> lock(running_, std::try_to_lock);
  if (!lock.owns_lock())
    return ResourceExhausted("Tune: another Tune is running; one runs at a time");

  int merged = 0;
  for (DType dt : dtypes) {
    for (const Problem& p : problems) {
      if (cancelled()) return Status(StatusCode::kCancelled, "Tune: cancelled by the caller");
      TuneProblemSpec spec;
      spec.op = op;
      spec.attrs = p.attrs;
      spec.seed = req.seed();
      spec.repeats = repeats;
      spec.lo = op->bench.lo;
      spec.hi = op->bench.hi;
      const Shape& first = p.shapes.at(op->inputs[0].name);
      if (op->bench.range_per_hidden && !first.empty() && first.back() > 0) {
        spec.lo /= static_cast<double>(first.back());
        spec.hi /= static_cast<double>(first.back());
      }
      std::mt19937_64 rng(req.seed());
      const BenchProblem drawn = DrawBenchProblem(*op, p.shapes, dt, rng);
      std::string text(DTypeName(dt));
      for (const InputDef& in : op->inputs) {
        TuneInput ti;
        ti.dtype = InputDType(in, dt);
        ti.shape = p.shapes.at(in.name);
        if (auto it = drawn.index.find(in.name); it != drawn.index.end()) ti.values = &it->second;
        spec.inputs.push_back(ti);
        text += " " + in.name + "=" + ShapeText(ti.shape);
      }
      for (const auto& [n, v] : p.attrs) text += " " + n + "=" + AttrText(v);
      for (DeviceWorker* w : targets) {
        const DeviceInfo& dev = w->info();
        v1::TuneResult* r = resp->add_results();
        r->set_problem(text);
        r->set_device(dev.device.ToString());
        const std::string model = Scheduler::ModelOf(dev);
        r->mutable_bucket()->set_device_model(model);
        TuneTiming timing;
        Status st;
        if (dev.device.is_cuda()) {
          st = TimeOnCuda(dev, spec, &timing);
        } else {
          auto* cpu = dynamic_cast<CpuWorker*>(w);
          st = cpu == nullptr ? FailedPrecondition(dev.device.ToString() + " cannot be timed")
                              : TimeOnCpu(dev, cpu->pool(), spec, &timing);
        }
        if (!st.ok()) {
          r->set_error(st.message());
          continue;
        }
        const std::string dims = BucketDims(*op, timing.bucket);
        const std::string dtypes_text =
            BucketDTypes(timing.bucket, static_cast<int>(op->inputs.size()));
        r->mutable_bucket()->set_bucket(dims);
        r->mutable_bucket()->set_dtypes(dtypes_text);
        if (timing.impls.empty())
          r->set_error("no implementation of " + op->name + " accepts this problem on " +
                       dev.device.ToString());
        const ImplTiming* best = nullptr;
        std::string errors;
        for (const ImplTiming& t : timing.impls) {
          if (!t.error.empty()) {
            errors += (errors.empty() ? "" : "; ") + t.impl->backend + ": " + t.error;
            continue;
          }
          v1::TuningTime* tt = r->mutable_bucket()->add_times();
          tt->set_backend(t.impl->backend);
          tt->set_median_ns(t.median_ns);
          tt->set_runs(repeats);
          if (best == nullptr || t.median_ns < best->median_ns) best = &t;
          // The median stands for up to kSamples runs: an online re-check
          // moves it no faster than as many fresh runs would.
          TuningRow row;
          row.op = op->name;
          row.impl = t.impl->backend;
          row.dtypes = dtypes_text;
          row.bucket = dims;
          row.model = model;
          row.runs = repeats;
          row.median_ns = row.ewma_ns = t.median_ns;
          row.samples.assign(static_cast<size_t>(std::min(repeats, ImplStats::kSamples)),
                             t.median_ns);
          if (table_.Insert(row)) ++merged;
        }
        if (best != nullptr) r->mutable_bucket()->set_chosen(best->impl->backend);
        if (!errors.empty() && r->error().empty()) r->set_error(errors);
      }
    }
  }
  resp->set_rows_merged(merged);
  resp->set_tuning_mode(cfg_.tuning);
  if (!cfg_.tuning_file.empty()) {
    KERNELD_RETURN_IF_ERROR(SaveTuningFile(table_, StampOf(devices_), cfg_.tuning_file));
    resp->set_tuning_file(cfg_.tuning_file);
  }
  return Status::Ok();
}

grpc::Status TuneHandler::Answer(grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                                 grpc::ByteBuffer* out) {
  Identity who;
  if (Status st = AdmitCall(ctx, &who); !st.ok()) return ToGrpc(st);
  v1::TuneRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  v1::TuneResponse resp;
  if (Status st = Tune(
          who, req, [&] { return ctx.IsCancelled(); }, &resp);
      !st.ok())
    return ToGrpc(st);
  return SerializeRawMessage(resp, out);
}

grpc::ServerUnaryReactor* TuningServiceImpl::Tune(grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* req,
                                                  grpc::ByteBuffer* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(h_.Answer(*ctx, *req, resp));
  return reactor;
}

TuningServiceSyncImpl::TuningServiceSyncImpl(TuneHandler& h) : h_(h) {
  AddUnary("kerneld.v1.TuningService", "Tune",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return h_.Answer(*ctx, in, out);
           });
}

}  // namespace kerneld::server
