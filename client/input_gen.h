// Random inputs for `kernelctl run` and `perf` that an op accepts and that
// mean something: shapes follow the schema's rules from --shape, values
// follow each input's generation hint (ListKernels' TensorSpec.generation:
// probabilities that sum to 1 per row, positions inside the cache that
// indexes them). Every op then runs with `kernelctl run OP --shape S`.
#pragma once

#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kerneld/dtype.h"
#include "kerneld/host_tensor.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::client {

struct InputRequest {
  // --dtype: the first input's dtype (an error when it does not take it),
  // and every other input's that takes it. Unset: float32 where taken.
  std::optional<DType> dtype;
  std::vector<int64_t> shape = {1024};  // --shape: the first input's
  // --input NAME=DTYPE:SHAPE: that input's dtype and shape, as given.
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> overrides;
};

// How input `i` of `k` is generated: the daemon's TensorSpec.generation, or
// for a daemon that predates it this build's schema of the same op.
v1::InputGeneration GenerationOf(const v1::KernelInfo& k, int i);

// Every input of `k`, by name. False with *error on a request that cannot
// be what the user meant (a dtype the op does not take, an unknown input).
bool GenerateInputs(const v1::KernelInfo& k, const InputRequest& r, std::mt19937_64& rng,
                    HostTensors* out, std::string* error);

}  // namespace kerneld::client
