#include "kerneld/input_gen.h"

#include <algorithm>

#include "kerneld/check.h"

namespace kerneld {

bool IsStructuredIndex(InputGen kind) {
  switch (kind) {
    case InputGen::kIndptr:
    case InputGen::kLength:
    case InputGen::kPermutation:
    case InputGen::kSegment:
    case InputGen::kModulo:
      return true;
    default:
      return false;
  }
}

void StructuredIndex(InputGen kind, int64_t upper, std::mt19937_64& rng,
                     std::vector<double>* values) {
  const auto n = static_cast<int64_t>(values->size());
  std::vector<double>& v = *values;
  switch (kind) {
    case InputGen::kIndptr:
      for (int64_t b = 0; b < n; ++b)
        v[static_cast<size_t>(b)] = n > 1 ? static_cast<double>(b * upper / (n - 1)) : 0;
      break;
    case InputGen::kLength: {
      std::uniform_int_distribution<int64_t> d(1, std::max<int64_t>(upper, 1));
      for (double& x : v) x = static_cast<double>(d(rng));
      break;
    }
    case InputGen::kPermutation: {
      std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(upper, 1)));
      for (size_t j = 0; j < perm.size(); ++j) perm[j] = static_cast<int64_t>(j);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (size_t j = 0; j < v.size(); ++j)
        v[j] = upper > 0 ? static_cast<double>(perm[j % perm.size()]) : 0;
      break;
    }
    case InputGen::kSegment:
      for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<double>(i * upper / n);
      break;
    case InputGen::kModulo:
      for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = upper > 0 ? static_cast<double>(i % upper) : 0;
      break;
    default:
      break;
  }
}

int64_t GenUpper(const ShapeBindings& bind, const std::string& name) {
  auto it = bind.symbols.find(name);
  return it == bind.symbols.end() ? 1 : it->second;
}

DType InputDType(const InputDef& in, DType want) {
  if (in.dtypes.Contains(want)) return want;
  DType dt = DType::kInvalid;
  in.dtypes.ForEach([&](DType x) {
    if (dt == DType::kInvalid) dt = x;
  });
  return dt;
}

BenchProblem DrawBenchProblem(const OpDef& op, const std::map<std::string, Shape>& shapes,
                              DType dtype, std::mt19937_64& rng) {
  BenchProblem p;
  p.shapes = shapes;
  p.dtype = dtype;
  p.attrs = op.bench.attrs;
  ShapeBindings bind;
  for (const InputDef& in : op.inputs)
    if (auto it = shapes.find(in.name); it != shapes.end())
      (void)MatchShape(op.name, in.name, in.shape, it->second, &bind);
  for (const InputDef& in : op.inputs) {
    auto it = shapes.find(in.name);
    if (it == shapes.end() || !IsStructuredIndex(in.gen)) continue;
    const DType dt = InputDType(in, dtype);
    HostTensor t{dt, it->second, std::vector<double>(static_cast<size_t>(Numel(it->second)), 0.0)};
    StructuredIndex(in.gen, GenUpper(bind, in.gen_upper), rng, &t.values);
    p.index[in.name] = std::move(t);
  }
  return p;
}

}  // namespace kerneld
