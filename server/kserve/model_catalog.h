// kerneld's ops as KServe v2 models: each op is a model of the same name,
// with one version ("1"), ready while the daemon serves. Its metadata and
// config come from the op's schema alone: inputs and outputs by name, each
// with its default datatype (DefaultDType: a request may send any dtype the
// schema takes) and its dims, -1 where the schema's shape rule is symbolic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "kerneld/op.h"

namespace kerneld::server::kserve {

inline constexpr char kModelVersion[] = "1";
inline constexpr char kPlatform[] = "kerneld";

// The served op `name` names (test ops only with `test_ops`) at `version`
// ("" or "1"): OK with *op, else NOT_FOUND naming what is served.
Status FindModel(const std::string& name, const std::string& version, bool test_ops,
                 const OpDef** op);
// Every served op, in the registry's order.
std::vector<const OpDef*> ServedModels(bool test_ops);

// Dims of a shape rule: constants as written, symbols -1, and "..." (any
// number of leading dims) one -1; "[...]" alone is [-1]. A request may send
// any rank the rule accepts.
std::vector<int64_t> DimsOf(const ShapePattern& p);

// The datatype and dims the metadata lists for output `i` of `op`.
DType OutputDefaultDType(const OpDef& op, size_t i);
std::vector<int64_t> OutputDims(const OpDef& op, size_t i);

void DescribeModel(const OpDef& op, inference::ModelMetadataResponse* out);
// max_batch_size 0 (a kernel's shapes are its own; perf_analyzer then
// sends exactly the --shape it is given); the attrs are listed under
// parameters as "<type>, required" or "<type>, default <value>".
void ConfigureModel(const OpDef& op, inference::ModelConfig* out);

}  // namespace kerneld::server::kserve
