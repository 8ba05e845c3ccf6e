// A KServe v2 ModelInferRequest into the kerneld.v1 ExecuteRequest that
// Execute runs (the same RequestRunner, decode, scheduler and metrics), and
// the ExecuteResponse back into a ModelInferResponse. Nothing here validates
// an op: the request becomes the call Execute would get, and kerneld's own
// decode (service/request_decode.h) checks it and says what is wrong. Only
// what the v1 request cannot carry is checked here: datatype names, typed
// contents, raw_input_contents' count and sizes, and shared-memory
// parameters.
//
// The mapping (docs/kserve.md):
//   model_name           -> op (model_version "" or "1")
//   inputs[i]            -> inputs[name]: datatype -> dtype, shape, and its
//                           bytes: the next raw_input_contents entry (moved,
//                           not copied), typed contents, or a registered
//                           shared-memory region (shared_memory_region /
//                           _byte_size / _offset) -> buffer reference
//   parameters           -> attrs (bool, int64, uint64, double, string),
//                           except the protocol's own (priority, timeout,
//                           sequence_*, triton_*: ignored) and
//                           kerneld.backend / kerneld.device (the v1
//                           request's backend and device)
//   outputs[j]           -> which outputs are answered, in that order (none:
//                           all); one with a shared-memory region is placed
//                           there (v1: a placed output with its header left
//                           to the op)
// The answer carries every answered output in raw_output_contents (an empty
// entry for one in shared memory), or in typed contents when the inputs came
// typed and every answered output's datatype has a typed field.
//
// Everything a client sends is untrusted: tests/fuzz/kserve_decode_fuzz.cc
// drives DecodeInfer, then DecodeRequest, then EncodeInfer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "kerneld/op.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::server::kserve {

// A registered shared-memory region as a request names it: the kerneld
// buffer behind it and the region's size.
struct RegionRef {
  std::string buffer_id;
  uint64_t byte_size = 0;
};
// The caller's region called `name` (kserve/shm_regions.h): OK, or the
// status that names it unknown.
using RegionLookup = std::function<Status(const std::string& name, RegionRef* out)>;

struct InferOptions {
  bool test_ops = false;  // serve "_test_*" ops as models
};

// What answering the request needs of it, kept beside the v1 call.
struct InferState {
  const OpDef* op = nullptr;
  std::string id;
  struct Output {
    int index = 0;       // in op->outputs
    std::string region;  // "": answered in the response
    uint64_t shm_byte_size = 0;
  };
  std::vector<Output> outputs;  // answered, in this order
  // Inputs read from shared memory, by name: their region (an in-place
  // output of one is written there, and says so).
  std::map<std::string, std::string> input_regions;
  bool typed = false;  // the inputs came in typed contents
};

// Fills *out (an empty ExecuteRequest) and *state from *req; the raw input
// contents are moved out of *req. Not OK: the status to answer with.
Status DecodeInfer(inference::ModelInferRequest* req, const InferOptions& opt,
                   const RegionLookup& regions, v1::ExecuteRequest* out, InferState* state);

// The runner's OK answer into *out; output bytes are moved out of *resp.
// Not OK (an output larger than its region's shared_memory_byte_size): the
// status to answer with.
Status EncodeInfer(v1::ExecuteResponse* resp, const InferState& state,
                   inference::ModelInferResponse* out);

// Whether `name` is a request parameter of the protocol itself rather than
// an attr (docs/kserve.md lists them).
bool IsProtocolParameter(const std::string& name);

}  // namespace kerneld::server::kserve
