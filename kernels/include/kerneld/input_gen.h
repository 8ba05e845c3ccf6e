// The values of an op's index inputs whose values follow from their place
// and one bound (InputGen kIndptr, kLength, kPermutation, kSegment,
// kModulo): what clients draw for `kernelctl run` (client/input_gen.cc,
// from ListKernels' TensorSpec.generation) and kernel_bench draws for its
// problems, so that both send inputs the op accepts.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kerneld/schema.h"
#include "kerneld/shape_pattern.h"

namespace kerneld {

// The dtype input `in` is drawn in: `want` where the input takes it, else
// its first (an index input stays int32 in a float16 problem). Shared by
// kernel_bench's problems, EvaluateKernel and the tuning sweeps, so that
// each sends what the others would.
DType InputDType(const InputDef& in, DType want);

// True for the kinds StructuredIndex fills.
bool IsStructuredIndex(InputGen kind);

// Fills `values` (as laid out: their count is the input's numel) by kind,
// with `upper` the value of the kind's bounding symbol; other kinds are
// left as they are.
void StructuredIndex(InputGen kind, int64_t upper, std::mt19937_64& rng,
                     std::vector<double>* values);

// The value of symbol `name` among the bound ones; 1 when it is unbound
// (the bound of an index whose symbol nothing sized).
int64_t GenUpper(const ShapeBindings& bind, const std::string& name);

// kernel_bench's problem of `op` at `shapes` (every input's): the symbols
// the shapes bind under the schema's patterns, then each input of a
// structured kind drawn from rng (in `dtype` where the input takes it,
// else its first dtype), with the shapes, dtype and op.bench.attrs.
BenchProblem DrawBenchProblem(const OpDef& op, const std::map<std::string, Shape>& shapes,
                              DType dtype, std::mt19937_64& rng);

}  // namespace kerneld
