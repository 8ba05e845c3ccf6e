#include "graph/graph_plan.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "graph/graph_memory.h"
#include "kerneld/check.h"
#include "kerneld/size.h"
#include "service/tensor_codec.h"

namespace kerneld::server {

namespace {

// The synthetic graph op (graph_exec.h) has this many output slots.
constexpr size_t kMaxGraphOutputs = 256;

bool ValidName(std::string_view n) {
  return !n.empty() && n.size() <= 128 && n.find('.') == std::string_view::npos;
}

// "step<digits>": the name every step answers to by index.
std::optional<size_t> IndexName(std::string_view n) {
  if (n.size() < 5 || n.substr(0, 4) != "step" || n.size() > 12) return std::nullopt;
  size_t v = 0;
  for (char c : n.substr(4)) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  return v;
}

std::string Names(const std::vector<std::string>& v) { return "{" + Join(v) + "}"; }

struct Builder {
  const v1::ExecuteGraphRequest& req;
  const GraphLimits& limits;
  GraphPlan* plan;
  std::map<std::string, int, std::less<>> input_ids;    // graph input name -> value id
  std::map<std::string, size_t, std::less<>> step_ids;  // step name -> index

  // "graph step 3 (rmsnorm)", from the request: later steps are not decoded yet.
  std::string Label(size_t i) const {
    return "graph step " + std::to_string(i) + " (" +
           Sanitize(req.steps(static_cast<int>(i)).op()) + ")";
  }

  // Resolves `ref` as read at step `at` (at == steps: a graph output) into a
  // value id. `what` names the reader for the message.
  Status Resolve(const std::string& ref, size_t at, const std::string& what, int* value) {
    const size_t dot = ref.find('.');
    const std::string_view step_part = std::string_view(ref).substr(0, dot);
    if (dot == std::string::npos) {
      if (auto it = input_ids.find(ref); it != input_ids.end()) {
        *value = it->second;
        return Status::Ok();
      }
    }
    std::optional<size_t> idx;
    if (auto it = step_ids.find(step_part); it != step_ids.end()) idx = it->second;
    if (!idx) idx = IndexName(step_part);
    if (!idx || *idx >= static_cast<size_t>(req.steps_size()))
      return InvalidArgument(what + " refers to " + Quote(ref) +
                             ", which is neither a graph input nor a step; graph inputs are " +
                             Names(plan->input_names));
    if (*idx >= at)
      return InvalidArgument(what + " refers to " + Quote(ref) + ", " + Label(*idx) +
                             (*idx == at ? ", itself" : ", which comes later") +
                             ": a step reads only graph inputs and earlier steps' outputs");
    const GraphStepPlan& src = plan->steps[*idx];
    int out = 0;
    if (dot != std::string::npos) {
      out = src.op->OutputIndex(std::string_view(ref).substr(dot + 1));
      if (out < 0) {
        std::vector<std::string> names;
        for (const auto& o : src.op->outputs) names.push_back(o.name);
        return InvalidArgument(what + " refers to " + Quote(ref) + ", but " +
                               plan->StepLabel(*idx) + " has no output " +
                               Quote(ref.substr(dot + 1)) + "; its outputs are " + Names(names));
      }
    }
    *value = src.outputs[static_cast<size_t>(out)];
    return Status::Ok();
  }

  Status Inputs() {
    for (const auto& [name, t] : req.inputs()) plan->input_names.push_back(name);
    std::sort(plan->input_names.begin(), plan->input_names.end());
    for (const std::string& name : plan->input_names) {
      if (!ValidName(name))
        return InvalidArgument("graph input " + Quote(name) +
                               ": a name is 1 to 128 characters without '.'");
      const v1::Tensor& t = req.inputs().at(name);
      auto what = [&] { return "graph input '" + Sanitize(name) + "'"; };
      int64_t nbytes = 0;
      KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
      if (t.data_case() == v1::Tensor::kInlineData &&
          static_cast<int64_t>(t.inline_data().size()) != nbytes)
        return InvalidArgument(what() + ": inline_data has " +
                               std::to_string(t.inline_data().size()) + " bytes; " +
                               std::string(DTypeName(FromProto(t.dtype()))) + " " +
                               ShapeToString(Shape(t.shape().begin(), t.shape().end())) +
                               " needs " + std::to_string(nbytes));
      if (t.data_case() == v1::Tensor::DATA_NOT_SET && nbytes != 0)
        return InvalidArgument(what() + " has no data; set inline_data (" + std::to_string(nbytes) +
                               " bytes) or buffer");
      GraphValue v;
      v.dtype = FromProto(t.dtype());
      v.shape.assign(t.shape().begin(), t.shape().end());
      v.bytes = nbytes;
      v.storage.kind = GraphStorage::Kind::kInput;
      v.storage.index = static_cast<int>(plan->values.size());
      input_ids.emplace(name, static_cast<int>(plan->values.size()));
      plan->values.push_back(std::move(v));
    }
    return Status::Ok();
  }

  Status StepNames() {
    for (int i = 0; i < req.steps_size(); ++i) {
      const std::string& n = req.steps(i).name();
      const size_t idx = static_cast<size_t>(i);
      if (n.empty()) continue;
      auto what = [&] { return Label(idx); };
      if (!ValidName(n))
        return InvalidArgument(what() + ": name " + Quote(n) +
                               " is not 1 to 128 characters without '.'");
      if (auto as_index = IndexName(n); as_index && *as_index != idx)
        return InvalidArgument(what() + ": name " + Quote(n) + " is step " +
                               std::to_string(*as_index) + "'s index name");
      if (input_ids.count(n))
        return InvalidArgument(what() + ": name " + Quote(n) + " is also a graph input's");
      if (!step_ids.emplace(n, idx).second)
        return InvalidArgument(what() + ": name " + Quote(n) + " is taken by " +
                               Label(step_ids[n]) + "; step names are unique");
    }
    return Status::Ok();
  }

  Status Step(size_t i) {
    const v1::GraphStep& s = req.steps(static_cast<int>(i));
    GraphStepPlan& st = plan->steps[i];
    const OpDef* op = OpRegistry::Global().Find(s.op());
    if (op != nullptr && op->test_only() && !limits.test_ops) op = nullptr;
    const std::string label = "graph step " + std::to_string(i) + " (" + Sanitize(s.op()) + ")";
    if (op == nullptr)
      return s.op().empty() ? InvalidArgument(label + ": op is empty")
                            : NotFound(label + ": unknown op " + Quote(s.op()) +
                                       " (ListKernels lists this server's ops)");
    st.op = op;
    st.name = s.name().empty() ? "step" + std::to_string(i) : s.name();
    st.backend = s.backend();
    auto prefixed = [&](const Status& e) { return Status(e.code(), label + ": " + e.message()); };

    AttrMap given;
    for (const auto& [name, v] : s.attrs()) {
      AttrValue a;
      const std::string& attr = name;
      Status e = FromProto([&] { return op->name + ": attr " + Quote(attr); }, v, &a);
      if (!e.ok()) return prefixed(e);
      given.emplace(name, std::move(a));
    }
    KernelContext ctx;
    if (Status e = PrepareAttrs(*op, given, &ctx); !e.ok()) return prefixed(e);

    st.inputs.assign(op->inputs.size(), -1);
    ctx.inputs.assign(op->inputs.size(), TensorView{});
    for (const auto& [name, ref] : s.inputs()) {
      const int idx = op->InputIndex(name);
      if (idx < 0) {
        std::vector<std::string> names;
        for (const auto& in : op->inputs) names.push_back(in.name);
        return InvalidArgument(label + ": unknown input " + Quote(name) + "; inputs are " +
                               Names(names));
      }
      int value = -1;
      KERNELD_RETURN_IF_ERROR(Resolve(ref, i, label + ": input " + Quote(name), &value));
      st.inputs[static_cast<size_t>(idx)] = value;
      GraphValue& v = plan->values[static_cast<size_t>(value)];
      v.last_reader = static_cast<int>(i);
      TensorView& view = ctx.inputs[static_cast<size_t>(idx)];
      view.dtype = v.dtype;
      view.shape = v.shape;
    }
    std::vector<OutputSpec> specs;
    if (Status e = PrepareInputs(ctx, &specs); !e.ok()) return prefixed(e);
    st.attrs = std::move(ctx.attrs);
    for (size_t o = 0; o < specs.size(); ++o) {
      GraphValue v;
      v.dtype = specs[o].dtype;
      v.shape = specs[o].shape;
      int64_t nbytes = 0;
      if (Status e = CheckTensorSize(label + ": output '" + op->outputs[o].name + "'", v.dtype,
                                     v.shape, &nbytes);
          !e.ok())
        return e;
      v.bytes = nbytes;
      v.producer = static_cast<int>(i);
      v.output = static_cast<int>(o);
      st.outputs.push_back(static_cast<int>(plan->values.size()));
      plan->values.push_back(std::move(v));
    }
    return Status::Ok();
  }

  Status Outputs() {
    const size_t n_steps = plan->steps.size();
    if (req.outputs_size() == 0) {
      if (n_steps == 0) return Status::Ok();
      const GraphStepPlan& last = plan->steps.back();
      for (size_t o = 0; o < last.outputs.size(); ++o) {
        GraphOutputPlan out;
        out.name = last.op->outputs[o].name;
        out.value = last.outputs[o];
        plan->outputs.push_back(std::move(out));
      }
    } else {
      if (static_cast<size_t>(req.outputs_size()) > kMaxGraphOutputs)
        return InvalidArgument("the graph declares " + std::to_string(req.outputs_size()) +
                               " outputs; at most " + std::to_string(kMaxGraphOutputs));
      for (int j = 0; j < req.outputs_size(); ++j) {
        const v1::GraphOutput& g = req.outputs(j);
        const std::string what = "graph output " + std::to_string(j) + " " + Quote(g.name());
        if (!ValidName(g.name()))
          return InvalidArgument(what + ": a name is 1 to 128 characters without '.'");
        for (const auto& o : plan->outputs)
          if (o.name == g.name()) return InvalidArgument(what + ": the name is used twice");
        GraphOutputPlan out;
        out.name = g.name();
        KERNELD_RETURN_IF_ERROR(Resolve(g.source(), n_steps, what, &out.value));
        if (plan->values[static_cast<size_t>(out.value)].producer < 0)
          return InvalidArgument(what + ": source " + Quote(g.source()) +
                                 " is a graph input; outputs name a step's output");
        for (const auto& o : plan->outputs)
          if (o.value == out.value)
            return InvalidArgument(what + ": source " + Quote(g.source()) +
                                   " is already returned as " + Quote(o.name));
        out.to_buffer = g.has_buffer();
        if (out.to_buffer) out.buffer = g.buffer();
        plan->outputs.push_back(std::move(out));
      }
    }
    for (size_t j = 0; j < plan->outputs.size(); ++j) {
      GraphValue& v = plan->values[static_cast<size_t>(plan->outputs[j].value)];
      v.graph_output = static_cast<int>(j);
      v.storage.kind = GraphStorage::Kind::kOutput;
      v.storage.index = static_cast<int>(j);
      if (!plan->outputs[j].to_buffer) plan->inline_out_bytes += v.bytes;
    }
    if (limits.max_inline_out_bytes > 0 && plan->inline_out_bytes > limits.max_inline_out_bytes)
      return ResourceExhausted("the graph's inline outputs would be " +
                               HumanBytes(plan->inline_out_bytes) + "; a response holds at most " +
                               HumanBytes(limits.max_inline_out_bytes) +
                               " (--max_message_mb). Write outputs into registered buffers");
    return Status::Ok();
  }

  // Storage of every step output: a graph output's own memory, its input's
  // arena block (in place, where the schema allows and nothing reads the
  // input later), or a new arena block.
  void Storage() {
    auto new_block = [&](GraphValue& v, int first) {
      GraphArenaBlock b;
      b.bytes = v.bytes;
      b.first = first;
      b.last = std::max(first, v.last_reader);
      v.storage.kind = GraphStorage::Kind::kArena;
      v.storage.index = static_cast<int>(plan->blocks.size());
      plan->blocks.push_back(b);
    };
    for (size_t i = 0; i < plan->steps.size(); ++i) {
      GraphStepPlan& st = plan->steps[i];
      const OpDef& op = *st.op;
      st.read_from = st.inputs;
      for (size_t o = 0; o < st.outputs.size(); ++o) {
        const OutputDef& od = op.outputs[o];
        GraphValue& v = plan->values[static_cast<size_t>(st.outputs[o])];
        const std::string& src_name = !od.in_place_of.empty() ? od.in_place_of : od.may_alias;
        int src = -1;
        int src_idx = -1;
        if (!src_name.empty()) {
          src_idx = op.InputIndex(src_name);
          src = st.inputs[static_cast<size_t>(src_idx)];
        }
        bool reuse = false;
        if (src >= 0 && v.graph_output < 0) {
          const GraphValue& u = plan->values[static_cast<size_t>(src)];
          const int readers_here =
              static_cast<int>(std::count(st.inputs.begin(), st.inputs.end(), src));
          reuse = u.storage.kind == GraphStorage::Kind::kArena && u.graph_output < 0 &&
                  u.last_reader == static_cast<int>(i) && readers_here == 1;
        }
        if (reuse) {
          const GraphValue& u = plan->values[static_cast<size_t>(src)];
          v.storage = u.storage;
          GraphArenaBlock& b = plan->blocks[static_cast<size_t>(u.storage.index)];
          b.last = std::max({b.last, static_cast<int>(i), v.last_reader});
          continue;
        }
        if (v.graph_output < 0) new_block(v, static_cast<int>(i));
        if (!od.in_place_of.empty()) {
          // Written in place: the output starts as a copy of its input, and
          // the kernel reads and writes that copy.
          st.copies.emplace_back(src, st.outputs[o]);
          st.read_from[static_cast<size_t>(src_idx)] = st.outputs[o];
        }
      }
      for (int out : st.outputs)
        if (GraphValue& v = plan->values[static_cast<size_t>(out)];
            v.storage.kind == GraphStorage::Kind::kArena)
          plan->intermediate_bytes += v.bytes;
    }
  }
};

}  // namespace

std::string GraphPlan::StepLabel(size_t i) const {
  if (i < steps.size() && steps[i].op != nullptr)
    return "graph step " + std::to_string(i) + " (" + steps[i].op->name + ")";
  return "graph step " + std::to_string(i);
}

Status BuildGraphPlan(const v1::ExecuteGraphRequest& req, const GraphLimits& limits,
                      GraphPlan* plan) {
  if (req.steps_size() > limits.max_steps)
    return InvalidArgument("the graph has " + std::to_string(req.steps_size()) +
                           " steps; at most " + std::to_string(limits.max_steps) +
                           " (--max_graph_steps)");
  if (req.steps_size() == 0) return InvalidArgument("the graph has no steps");
  Builder b{req, limits, plan, {}, {}};
  KERNELD_RETURN_IF_ERROR(b.Inputs());
  KERNELD_RETURN_IF_ERROR(b.StepNames());
  plan->steps.resize(static_cast<size_t>(req.steps_size()));
  for (size_t i = 0; i < plan->steps.size(); ++i) KERNELD_RETURN_IF_ERROR(b.Step(i));
  KERNELD_RETURN_IF_ERROR(b.Outputs());
  b.Storage();
  plan->arena_bytes = PlanArena(&plan->blocks);
  if (plan->arena_bytes < 0)
    return ResourceExhausted("the graph's intermediates exceed 2^62 bytes");
  for (GraphValue& v : plan->values)
    if (v.storage.kind == GraphStorage::Kind::kArena)
      v.storage.offset = plan->blocks[static_cast<size_t>(v.storage.index)].offset;
  return Status::Ok();
}

}  // namespace kerneld::server
