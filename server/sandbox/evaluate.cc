#include "sandbox/evaluate.h"

#include <random>

#include "kerneld/call.h"
#include "kerneld/check.h"
#include "kerneld/input_gen.h"
#include "kerneld/reference.h"
#include "kerneld/registry.h"
#include "kerneld/size.h"
#include "service/tensor_codec.h"

namespace kerneld::server::sandbox {

namespace {

// The host holds every input and output in float64 several times over.
constexpr int64_t kMaxEvaluateElements = int64_t{1} << 25;
constexpr int kMaxIterations = 1000;

// kernelctl's generation (client/input_gen.cc) over the built-in's schema.
HostTensor Draw(const InputDef& in, DType dt, const Shape& shape, const ShapeBindings& bind,
                const BenchProblem& structured, std::mt19937_64& rng) {
  if (auto it = structured.index.find(in.name); it != structured.index.end()) return it->second;
  switch (in.gen) {
    case InputGen::kProbabilities: {
      HostTensor t = Random(dt, shape, rng, 0.05, 1);
      const size_t row =
          shape.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(shape.back(), 1));
      for (size_t at = 0; at < t.values.size(); at += row) {
        double sum = 0;
        for (size_t j = at; j < at + row && j < t.values.size(); ++j) sum += t.values[j];
        for (size_t j = at; j < at + row && j < t.values.size(); ++j)
          t.values[j] = RoundTo(dt, t.values[j] / sum);
      }
      return t;
    }
    case InputGen::kIndex: {
      const int64_t upper = GenUpper(bind, in.gen_upper);
      return Random(dt, shape, rng, 0, static_cast<double>(std::max<int64_t>(upper, 1)));
    }
    default:
      return IsFloating(dt) ? Random(dt, shape, rng) : Random(dt, shape, rng, 0, 2);
  }
}

// Validates `inputs` and `attrs` against `op` as a request would be
// (kerneld/call.h), on host views of the values.
Status CheckAgainst(const OpDef& op, const HostTensors& inputs, const AttrMap& attrs,
                    std::vector<std::string>* keep, AttrMap* resolved) {
  KernelContext ctx;
  for (const InputDef& in : op.inputs) {
    TensorView v;
    v.device = Device::Cpu();
    if (auto it = inputs.find(in.name); it != inputs.end()) {
      keep->push_back(Encode(it->second.dtype, it->second.values));
      v.dtype = it->second.dtype;
      v.shape = it->second.shape;
      v.data = keep->back().data();
    }
    ctx.inputs.push_back(v);
  }
  std::vector<OutputSpec> specs;
  KERNELD_RETURN_IF_ERROR(Prepare(op, attrs, &ctx, &specs));
  if (resolved != nullptr) *resolved = ctx.attrs;
  return Status::Ok();
}

}  // namespace

Status BuildEvaluateProblem(const UserKernelRegistry& registry, const Principal& who,
                            const v1::EvaluateKernelRequest& req, EvaluateProblem* p,
                            HostTensors* ref) {
  const std::string name = req.name();
  p->user = registry.Find(who, name);
  if (p->user == nullptr)
    return NotFound("EvaluateKernel: no user kernel " + Quote(name) +
                    " that you can see (ListUserKernels)");
  if (req.against().empty())
    return InvalidArgument("EvaluateKernel: 'against' names the built-in op to compare with");
  p->builtin = OpRegistry::Global().Find(req.against());
  if (p->builtin == nullptr || p->builtin->test_only())
    return NotFound("EvaluateKernel: no built-in op " + Quote(req.against()) + " (ListKernels)");
  const OpDef& b = *p->builtin;
  const OpDef& u = *p->user;
  const std::string pair = name + " against " + b.name;
  if (!b.reference)
    return FailedPrecondition("EvaluateKernel: " + b.name + " has no float64 reference");
  // The same inputs by name and order, and every user output one of the built-in's.
  std::string uin, bin;
  for (const auto& in : u.inputs) uin += (uin.empty() ? "" : ", ") + in.name;
  for (const auto& in : b.inputs) bin += (bin.empty() ? "" : ", ") + in.name;
  if (uin != bin)
    return InvalidArgument("EvaluateKernel: " + pair + ": the inputs differ (" + name + ": " + uin +
                           "; " + b.name + ": " + bin + ")");
  for (const auto& out : u.outputs) {
    bool found = false;
    for (const auto& bo : b.outputs) found |= bo.name == out.name;
    if (!found)
      return InvalidArgument("EvaluateKernel: " + pair + ": output '" + out.name + "' is not one " +
                             b.name + " has");
  }
  // dtype, shapes (every input's), iterations.
  DType dtype = DType::kFloat32;
  if (!req.dtype().empty()) {
    auto d = ParseDType(req.dtype());
    if (!d) return InvalidArgument("EvaluateKernel: unknown dtype " + Quote(req.dtype()));
    dtype = *d;
  }
  if (!b.inputs.empty() && !b.inputs[0].dtypes.Contains(dtype))
    return InvalidArgument("EvaluateKernel: " + b.name + " input '" + b.inputs[0].name +
                           "' does not take " + std::string(DTypeName(dtype)));
  for (const auto& [n, s] : req.shapes()) {
    bool known = false;
    for (const auto& in : b.inputs) known |= in.name == n;
    if (!known)
      return InvalidArgument("EvaluateKernel: shapes: " + b.name + " has no input " + Quote(n));
  }
  std::map<std::string, Shape> shapes;
  int64_t elements = 0;
  for (const auto& in : b.inputs) {
    auto it = req.shapes().find(in.name);
    if (it == req.shapes().end())
      return InvalidArgument("EvaluateKernel: shapes: input '" + in.name + "' needs a shape");
    Shape s(it->second.dims().begin(), it->second.dims().end());
    KERNELD_RETURN_IF_ERROR(
        CheckTensorSize("EvaluateKernel: input '" + in.name + "'", InputDType(in, dtype), s));
    elements += Numel(s);
    if (elements > kMaxEvaluateElements)
      return InvalidArgument("EvaluateKernel: at most " + std::to_string(kMaxEvaluateElements) +
                             " input elements in all");
    shapes[in.name] = std::move(s);
  }
  if (req.iterations() < 0 || req.iterations() > kMaxIterations)
    return InvalidArgument("EvaluateKernel: iterations is 1-" + std::to_string(kMaxIterations) +
                           " (0: 30)");
  p->iterations = req.iterations() == 0 ? 30 : req.iterations();
  p->device = -1;
  if (!req.device().empty()) {
    const std::string& d = req.device();
    int idx = -1;
    if (d.rfind("cuda:", 0) != 0 || d.size() > 9 ||
        (idx = std::atoi(d.c_str() + 5), std::to_string(idx) != d.substr(5)))
      return InvalidArgument("EvaluateKernel: device is \"cuda:N\", not " + Quote(d));
    p->device = idx;
  }
  for (const auto& kv : req.attrs()) {
    const std::string& n = kv.first;  // not a structured binding: a lambda captures it
    AttrValue a;
    KERNELD_RETURN_IF_ERROR(
        FromProto([&] { return "EvaluateKernel: attr '" + n + "'"; }, kv.second, &a));
    p->attrs[n] = std::move(a);
  }
  // The inputs, then both schemas' checks on them, then the reference.
  std::mt19937_64 rng(req.seed());
  const BenchProblem structured = DrawBenchProblem(b, shapes, dtype, rng);
  ShapeBindings bind;
  for (const auto& in : b.inputs)
    (void)MatchShape(b.name, in.name, in.shape, shapes[in.name], &bind);
  for (const auto& in : b.inputs)
    p->inputs[in.name] = Draw(in, InputDType(in, dtype), shapes[in.name], bind, structured, rng);
  std::vector<std::string> keep;
  AttrMap resolved;
  KERNELD_RETURN_IF_ERROR(CheckAgainst(u, p->inputs, p->attrs, &keep, nullptr));
  KERNELD_RETURN_IF_ERROR(CheckAgainst(b, p->inputs, p->attrs, &keep, &resolved));
  std::string error;
  if (!Reference(b.name, p->inputs, resolved, ref, &error))
    return InvalidArgument("EvaluateKernel: " + b.name + "'s reference: " + error);
  return Status::Ok();
}

Status EvaluateKernel(const UserKernelRegistry& registry, UserKernelLauncher* launcher,
                      bool has_gpu, const Identity& who, const v1::EvaluateKernelRequest& req,
                      v1::EvaluateKernelResponse* resp) {
  EvaluateProblem p;
  HostTensors ref;
  KERNELD_RETURN_IF_ERROR(BuildEvaluateProblem(registry, who.principal, req, &p, &ref));
  if (!has_gpu || launcher == nullptr)
    return FailedPrecondition(
        "EvaluateKernel: " + req.name() + " runs on a GPU, and this daemon has " +
        (has_gpu ? "no sandbox in this build" : "none") + " (the request checked out against " +
        req.against() + "'s schema and reference)");
  std::shared_ptr<UserKernel> kernel = registry.KernelOf(p.user);
  if (kernel == nullptr) return NotFound("EvaluateKernel: " + req.name() + " was unregistered");
  EvaluateRun run;
  KERNELD_RETURN_IF_ERROR(launcher->Evaluate(*kernel, p, &run));
  for (const auto& out : p.user->outputs) {
    auto want = ref.find(out.name);
    auto got = run.user_outputs.find(out.name);
    auto bgot = run.builtin_outputs.find(out.name);
    if (want == ref.end() || got == run.user_outputs.end()) continue;
    double rtol, atol;
    Tolerance(got->second.dtype, &rtol, &atol);
    v1::OutputError* e = resp->add_errors();
    e->set_output(out.name);
    Comparison c = Compare(got->second.values, want->second.values, rtol, atol);
    e->set_max_abs_error(c.max_abs_err);
    e->set_max_rel_error(c.max_rel_err);
    if (bgot != run.builtin_outputs.end()) {
      Comparison bc = Compare(bgot->second.values, want->second.values, rtol, atol);
      e->set_builtin_max_abs_error(bc.max_abs_err);
      e->set_builtin_max_rel_error(bc.max_rel_err);
    }
  }
  resp->set_user_us(run.user_us);
  resp->set_builtin_us(run.builtin_us);
  resp->set_copy_us(run.copy_us);
  resp->set_builtin_backend(run.builtin_backend);
  resp->set_device(run.device);
  resp->set_iterations(p.iterations);
  return Status::Ok();
}

}  // namespace kerneld::server::sandbox
