#include "kserve/model_catalog.h"

#include "kserve/datatype.h"

namespace kerneld::server::kserve {

namespace {

bool Served(const OpDef* op, bool test_ops) {
  return op != nullptr && (!op->test_only() || test_ops);
}

}  // namespace

Status FindModel(const std::string& name, const std::string& version, bool test_ops,
                 const OpDef** op) {
  const OpDef* found = OpRegistry::Global().Find(name);
  if (!Served(found, test_ops)) {
    std::vector<std::string> names;
    for (const OpDef* o : ServedModels(test_ops)) names.push_back(o->name);
    if (name.empty())
      return InvalidArgument("model_name is empty; the models are kerneld's ops: {" + Join(names) +
                             "}");
    return NotFound("unknown model " + Quote(name) + "; kerneld serves its ops as models: {" +
                    Join(names) + "} (RepositoryIndex lists them, ModelMetadata describes each)");
  }
  if (!version.empty() && version != kModelVersion)
    return NotFound("model " + Quote(name) + " has no version " + Quote(version) +
                    "; its only version is \"1\" (or leave model_version empty)");
  *op = found;
  return Status::Ok();
}

std::vector<const OpDef*> ServedModels(bool test_ops) {
  std::vector<const OpDef*> out;
  for (const OpDef* op : OpRegistry::Global().List())
    if (Served(op, test_ops)) out.push_back(op);
  return out;
}

std::vector<int64_t> DimsOf(const ShapePattern& p) {
  if (p.any) return {-1};
  std::vector<int64_t> dims;
  for (const DimPattern& d : p.dims)
    dims.push_back(d.kind == DimPattern::Kind::kConst ? d.value : -1);
  return dims;
}

DType OutputDefaultDType(const OpDef& op, size_t i) {
  const OutputRule& rule = op.outputs[i].rule;
  if (rule.fixed_dtype != DType::kInvalid) return rule.fixed_dtype;
  // A rule of its own (no dtype_of): the first input's, as the likeliest.
  const int in = rule.dtype_of.empty() ? 0 : op.InputIndex(rule.dtype_of);
  if (in < 0 || op.inputs.empty()) return DType::kFloat32;
  return DefaultDType(op.inputs[static_cast<size_t>(in)].dtypes);
}

std::vector<int64_t> OutputDims(const OpDef& op, size_t i) {
  const OutputRule& rule = op.outputs[i].rule;
  if (!rule.shape_of.empty()) {
    const int in = op.InputIndex(rule.shape_of);
    if (in >= 0) return DimsOf(op.inputs[static_cast<size_t>(in)].shape);
  }
  if (!rule.shape.dims.empty() || rule.shape.any) return DimsOf(rule.shape);
  return {-1};  // a rule of its own
}

void DescribeModel(const OpDef& op, inference::ModelMetadataResponse* out) {
  out->set_name(op.name);
  out->add_versions(kModelVersion);
  out->set_platform(kPlatform);
  for (const InputDef& in : op.inputs) {
    auto* t = out->add_inputs();
    t->set_name(in.name);
    t->set_datatype(std::string(DatatypeOf(DefaultDType(in.dtypes))));
    for (int64_t d : DimsOf(in.shape)) t->add_shape(d);
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    auto* t = out->add_outputs();
    t->set_name(op.outputs[i].name);
    t->set_datatype(std::string(DatatypeOf(OutputDefaultDType(op, i))));
    for (int64_t d : OutputDims(op, i)) t->add_shape(d);
  }
}

void ConfigureModel(const OpDef& op, inference::ModelConfig* out) {
  out->set_name(op.name);
  out->set_platform(kPlatform);
  out->set_backend(kPlatform);
  out->set_max_batch_size(0);
  for (const InputDef& in : op.inputs) {
    auto* t = out->add_input();
    t->set_name(in.name);
    t->set_data_type(ConfigTypeOf(DefaultDType(in.dtypes)));
    for (int64_t d : DimsOf(in.shape)) t->add_dims(d);
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    auto* t = out->add_output();
    t->set_name(op.outputs[i].name);
    t->set_data_type(ConfigTypeOf(OutputDefaultDType(op, i)));
    for (int64_t d : OutputDims(op, i)) t->add_dims(d);
  }
  for (const AttrDef& a : op.attrs) {
    std::string v(AttrTypeName(a.type));
    v += a.default_value ? ", default " + AttrValueToString(*a.default_value) : ", required";
    (*out->mutable_parameters())[a.name].set_string_value(std::move(v));
  }
}

}  // namespace kerneld::server::kserve
