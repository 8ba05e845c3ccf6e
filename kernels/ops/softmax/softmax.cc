// softmax: probabilities from logits, row by row.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

Status CheckTemperature(const OpDef& op, const std::vector<TensorView>&, const AttrMap& attrs,
                        ShapeBindings*) {
  auto it = attrs.find("temperature");
  if (it == attrs.end()) return Status::Ok();  // the default, 1.0
  const double t = std::get<double>(it->second);
  if (!(t > 0) || !std::isfinite(t))
    return InvalidArgument(op.name + ": attr 'temperature' must be a finite value > 0, got " +
                           AttrValueToString(it->second));
  return Status::Ok();
}

bool SoftmaxReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
                      std::string* error) {
  const HostTensor* x = RefInput(in, "logits", "softmax", error);
  if (!x) return false;
  if (x->shape.size() != 2) return *error = "softmax: logits must be [batch, vocab]", false;
  // The kernels multiply by 1/temperature as a float.
  const double scale = static_cast<float>(1.0 / AttrOr(attrs, "temperature", 1.0));
  HostTensor y = *x;
  y.dtype = DType::kFloat32;
  const int64_t rows = x->shape[0], v = x->shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    double* row = y.values.data() + r * v;
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < v; ++i) m = std::max(m, row[i]);
    for (int64_t i = 0; i < v; ++i) sum += row[i] = std::exp((row[i] - m) * scale);
    for (int64_t i = 0; i < v; ++i) row[i] /= sum;
  }
  (*out)["probs"] = std::move(y);
  return true;
}

}  // namespace

KERNELD_OP(softmax) {
  OpDef op("softmax");
  op.Doc(
        "probs[b, :] = softmax(logits[b, :] / temperature), a numerically stable (max-"
        "subtracted) softmax over the last dim. Accumulated in float32; the output is float32 "
        "whatever the logits' dtype.")
      .Input("logits", kFloatingTypes, "[batch, vocab]", "any vocab size (odd ones too)")
      .Check(CheckTemperature)
      .Output("probs", ShapeOf("[batch, vocab]", DType::kFloat32), "float32 probabilities")
      .AttrWithDefault("temperature", AttrType::kFloat, 1.0, "divides the logits; > 0");
  op.Reference(SoftmaxReference);
  BenchSpec bench;
  bench.shapes = [](int64_t t, int64_t h) { return std::map<std::string, Shape>{{"logits", {t, h}}}; };
  // Decode batches (1-64 rows) over LLM vocabularies (32k-128k): one block a
  // row leaves most SMs idle there, the split-row kernel's case.
  bench.extra = {{"v32k1", 1, 32000},   {"v32k", 16, 32768},    {"v50k64", 64, 50000},
                 {"v128k1", 1, 128256}, {"v128k", 16, 128256}, {"v128k64", 64, 128256}};
  op.Bench(std::move(bench));
  return op;
}

}  // namespace kerneld
