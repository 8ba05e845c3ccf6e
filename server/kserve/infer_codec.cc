#include "kserve/infer_codec.h"

#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kerneld/size.h"
#include "kserve/datatype.h"
#include "kserve/model_catalog.h"
#include "service/tensor_codec.h"

namespace kerneld::server::kserve {

namespace {

using Params = google::protobuf::Map<std::string, inference::InferParameter>;
using Contents = inference::InferTensorContents;

constexpr char kBackendParam[] = "kerneld.backend";
constexpr char kDeviceParam[] = "kerneld.device";

std::string Names(const std::vector<std::string>& v) { return "{" + Join(v) + "}"; }

std::string InputNames(const OpDef& op) {
  std::vector<std::string> v;
  for (const auto& i : op.inputs) v.push_back(i.name);
  return Names(v);
}

std::string OutputNames(const OpDef& op) {
  std::vector<std::string> v;
  for (const auto& o : op.outputs) v.push_back(o.name);
  return Names(v);
}

// "FP32 [2, 3]", for messages.
std::string Header(DType dt, const v1::Tensor& t) {
  return std::string(DatatypeOf(dt)) + " " +
         ShapeToString(Shape(t.shape().begin(), t.shape().end()));
}

// ---- parameters --------------------------------------------------------

// A request parameter as a v1 attr value; uint64 only where it fits int64.
Status ToAttr(const std::string& name, const inference::InferParameter& p, v1::AttrValue* a) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      a->set_b(p.bool_param());
      return Status::Ok();
    case inference::InferParameter::kInt64Param:
      a->set_i(p.int64_param());
      return Status::Ok();
    case inference::InferParameter::kUint64Param:
      if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return InvalidArgument("parameter " + Quote(name) + " is uint64 " +
                               std::to_string(p.uint64_param()) +
                               ", beyond an int attr's range (int64)");
      a->set_i(static_cast<int64_t>(p.uint64_param()));
      return Status::Ok();
    case inference::InferParameter::kDoubleParam:
      a->set_f(p.double_param());
      return Status::Ok();
    case inference::InferParameter::kStringParam:
      a->set_s(p.string_param());
      return Status::Ok();
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
      break;
  }
  return InvalidArgument("parameter " + Quote(name) +
                         " has no value; set one of bool_param, int64_param, uint64_param, "
                         "double_param, string_param");
}

Status DecodeParameters(const inference::ModelInferRequest& req, v1::ExecuteRequest* out) {
  for (const auto& [name, p] : req.parameters()) {
    if (name == kBackendParam || name == kDeviceParam) {
      if (p.parameter_choice_case() != inference::InferParameter::kStringParam)
        return InvalidArgument("parameter " + Quote(name) + " takes a string_param");
      if (name == kBackendParam)
        out->set_backend(p.string_param());
      else
        out->set_device(p.string_param());
      continue;
    }
    if (IsProtocolParameter(name)) continue;
    KERNELD_RETURN_IF_ERROR(ToAttr(name, p, &(*out->mutable_attrs())[name]));
  }
  return Status::Ok();
}

// A tensor's shared-memory parameters.
struct ShmParams {
  std::string region;
  uint64_t byte_size = 0, offset = 0;
  bool has_size = false, has_offset = false;
};

Status NonNegative(WhatFn what, const std::string& key, const inference::InferParameter& p,
                   uint64_t* out) {
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    *out = p.uint64_param();
    return Status::Ok();
  }
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    *out = static_cast<uint64_t>(p.int64_param());
    return Status::Ok();
  }
  return InvalidArgument(what() + ": parameter " + key +
                         " must be a non-negative int64_param or a uint64_param");
}

Status ParseShm(const Params& params, WhatFn what, bool output, ShmParams* out) {
  for (const auto& [key, p] : params) {
    if (key == "shared_memory_region") {
      if (p.parameter_choice_case() != inference::InferParameter::kStringParam)
        return InvalidArgument(what() + ": parameter shared_memory_region takes a string_param");
      out->region = p.string_param();
    } else if (key == "shared_memory_byte_size") {
      KERNELD_RETURN_IF_ERROR(NonNegative(what, key, p, &out->byte_size));
      out->has_size = true;
    } else if (key == "shared_memory_offset") {
      KERNELD_RETURN_IF_ERROR(NonNegative(what, key, p, &out->offset));
      out->has_offset = true;
    } else if (key == "binary_data" || key == "binary_data_size") {
      continue;  // the HTTP protocol's; gRPC carries bytes natively
    } else if (output && key == "classification") {
      return InvalidArgument(what() +
                             ": classification is not served; kerneld's outputs are tensors");
    } else {
      return InvalidArgument(what() + ": unknown parameter " + Quote(key) +
                             "; a tensor takes shared_memory_region, shared_memory_byte_size "
                             "and shared_memory_offset");
    }
  }
  if (out->region.empty() && (out->has_size || out->has_offset))
    return InvalidArgument(what() +
                           ": shared_memory_byte_size or _offset without shared_memory_region");
  if (!out->region.empty() && !out->has_size)
    return InvalidArgument(what() + ": shared_memory_region " + Quote(out->region) +
                           " without shared_memory_byte_size");
  return Status::Ok();
}

// The region the parameters name, and [offset, offset + size) inside it.
Status ResolveRegion(const RegionLookup& regions, WhatFn what, const ShmParams& shm, uint64_t size,
                     v1::BufferRef* ref) {
  RegionRef r;
  if (Status st = regions(shm.region, &r); !st.ok())
    return Status(st.code(), what() + ": " + st.message());
  if (shm.offset > r.byte_size || size > r.byte_size - shm.offset)
    return InvalidArgument(what() + ": shared_memory_offset " + std::to_string(shm.offset) + " + " +
                           std::to_string(size) + " bytes is past the end of region " +
                           Quote(shm.region) + " (" + std::to_string(r.byte_size) + " bytes)");
  ref->set_buffer_id(r.buffer_id);
  ref->set_offset(shm.offset);
  return Status::Ok();
}

// ---- typed contents ----------------------------------------------------

// The contents field a datatype takes, by name; nullptr for none.
const char* TypedField(DType dt) {
  switch (dt) {
    case DType::kBool:
      return "bool_contents";
    case DType::kUInt8:
      return "uint_contents";
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      return "int_contents";
    case DType::kInt64:
      return "int64_contents";
    case DType::kFloat32:
      return "fp32_contents";
    case DType::kFloat64:
      return "fp64_contents";
    default:
      return nullptr;
  }
}

// Values in each field, and the first field holding any.
int64_t ValuesIn(const Contents& c, const char** first) {
  const std::pair<const char*, int> fields[] = {
      {"bool_contents", c.bool_contents_size()},     {"int_contents", c.int_contents_size()},
      {"int64_contents", c.int64_contents_size()},   {"uint_contents", c.uint_contents_size()},
      {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
      {"fp64_contents", c.fp64_contents_size()},     {"bytes_contents", c.bytes_contents_size()}};
  int64_t n = 0;
  *first = nullptr;
  for (const auto& [name, count] : fields) {
    if (count > 0 && *first == nullptr) *first = name;
    n += count;
  }
  return n;
}

// Values converted to T into *out, each checked to fit.
template <typename T, typename Field>
Status Pack(const Field& values, WhatFn what, const char* field, std::string* out) {
  out->resize(static_cast<size_t>(values.size()) * sizeof(T));
  char* p = out->data();
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<std::remove_cv_t<decltype(v)>, bool>) {
      if (!std::in_range<T>(v))
        return InvalidArgument(what() + ": " + field + "[" + std::to_string(i) +
                               "] = " + std::to_string(v) + " does not fit its datatype");
    }
    const T t = static_cast<T>(v);
    std::memcpy(p + static_cast<size_t>(i) * sizeof(T), &t, sizeof(T));
  }
  return Status::Ok();
}

Status PackContents(const Contents& c, DType dt, int64_t numel, WhatFn what, std::string* out) {
  const char* field = TypedField(dt);
  if (field == nullptr)
    return InvalidArgument(what() + ": " + std::string(DatatypeOf(dt)) +
                           " has no typed contents field in the protocol; send its bytes in "
                           "raw_input_contents");
  const char* first = nullptr;
  const int64_t n = ValuesIn(c, &first);
  if (first != nullptr && std::strcmp(first, field) != 0)
    return InvalidArgument(what() + ": " + std::string(DatatypeOf(dt)) + " takes " + field +
                           ", but contents has values in " + first);
  if (n != numel)
    return InvalidArgument(what() + ": contents has " + std::to_string(n) +
                           " values; its shape has " + std::to_string(numel) + " elements");
  switch (dt) {
    case DType::kBool:
      return Pack<uint8_t>(c.bool_contents(), what, field, out);
    case DType::kUInt8:
      return Pack<uint8_t>(c.uint_contents(), what, field, out);
    case DType::kInt8:
      return Pack<int8_t>(c.int_contents(), what, field, out);
    case DType::kInt16:
      return Pack<int16_t>(c.int_contents(), what, field, out);
    case DType::kInt32:
      return Pack<int32_t>(c.int_contents(), what, field, out);
    case DType::kInt64:
      return Pack<int64_t>(c.int64_contents(), what, field, out);
    case DType::kFloat32:
      return Pack<float>(c.fp32_contents(), what, field, out);
    case DType::kFloat64:
      return Pack<double>(c.fp64_contents(), what, field, out);
    default:
      return Internal(what() + ": no typed contents for this datatype");
  }
}

template <typename T, typename Field>
void Unpack(const std::string& bytes, Field* out) {
  const size_t n = bytes.size() / sizeof(T);
  out->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out->Add(v);
  }
}

void UnpackContents(const std::string& bytes, DType dt, Contents* c) {
  switch (dt) {
    case DType::kBool:
      Unpack<uint8_t>(bytes, c->mutable_bool_contents());
      break;
    case DType::kUInt8:
      Unpack<uint8_t>(bytes, c->mutable_uint_contents());
      break;
    case DType::kInt8:
      Unpack<int8_t>(bytes, c->mutable_int_contents());
      break;
    case DType::kInt16:
      Unpack<int16_t>(bytes, c->mutable_int_contents());
      break;
    case DType::kInt32:
      Unpack<int32_t>(bytes, c->mutable_int_contents());
      break;
    case DType::kInt64:
      Unpack<int64_t>(bytes, c->mutable_int64_contents());
      break;
    case DType::kFloat32:
      Unpack<float>(bytes, c->mutable_fp32_contents());
      break;
    case DType::kFloat64:
      Unpack<double>(bytes, c->mutable_fp64_contents());
      break;
    default:
      break;  // EncodeInfer answers raw when an output has no typed field
  }
}

// ---- inputs and outputs --------------------------------------------------

Status DecodeInputs(inference::ModelInferRequest* req, const OpDef& op, const RegionLookup& regions,
                    v1::ExecuteRequest* out, InferState* st) {
  const int raw_count = req->raw_input_contents_size();
  int raw_next = 0;
  for (int i = 0; i < req->inputs_size(); ++i) {
    inference::ModelInferRequest::InferInputTensor* in = req->mutable_inputs(i);
    const std::string& name = in->name();
    auto what = [&] { return op.name + ": input " + Quote(name); };
    // Names first: with no duplicates, a request stops here after at most
    // one more input than the model takes, however many it lists.
    if (op.InputIndex(name) < 0)
      return InvalidArgument(op.name + ": unknown input " + Quote(name) + "; inputs are " +
                             InputNames(op));
    if (out->inputs().contains(name)) return InvalidArgument(what() + " appears twice in inputs");
    const std::optional<DType> dt = DTypeOfDatatype(in->datatype());
    if (!dt)
      return InvalidArgument(what() + ": datatype " + Quote(in->datatype()) +
                             " is not one kerneld has; use one of " +
                             std::string(KnownDatatypes()));
    if (in->shape_size() > kMaxRank)
      return InvalidArgument(what() + " has rank " + std::to_string(in->shape_size()) +
                             "; at most " + std::to_string(kMaxRank) + " dims are supported");
    v1::Tensor& t = (*out->mutable_inputs())[name];
    t.set_dtype(ToProto(*dt));
    t.mutable_shape()->Add(in->shape().begin(), in->shape().end());
    int64_t nbytes = 0;
    KERNELD_RETURN_IF_ERROR(CheckTensorHeader(what, t, &nbytes));
    ShmParams shm;
    KERNELD_RETURN_IF_ERROR(ParseShm(in->parameters(), what, /*output=*/false, &shm));
    if (!shm.region.empty()) {
      if (in->has_contents())
        return InvalidArgument(what() +
                               " names a shared-memory region and has contents; one or "
                               "the other");
      if (shm.byte_size != static_cast<uint64_t>(nbytes))
        return InvalidArgument(what() + ": shared_memory_byte_size is " +
                               std::to_string(shm.byte_size) + "; " + Header(*dt, t) + " needs " +
                               std::to_string(nbytes) + " (elements x itemsize)");
      KERNELD_RETURN_IF_ERROR(ResolveRegion(regions, what, shm, shm.byte_size, t.mutable_buffer()));
      st->input_regions[name] = shm.region;
    } else if (in->has_contents()) {
      if (raw_count > 0)
        return InvalidArgument(what() +
                               " has contents, but the request carries raw_input_contents: "
                               "send every input's bytes one way or the other");
      const int64_t numel = nbytes / static_cast<int64_t>(ItemSize(*dt));
      KERNELD_RETURN_IF_ERROR(
          PackContents(in->contents(), *dt, numel, what, t.mutable_inline_data()));
      st->typed = true;
    } else if (raw_next < raw_count) {
      std::string* raw = req->mutable_raw_input_contents(raw_next);
      if (raw->size() != static_cast<uint64_t>(nbytes))
        return InvalidArgument(what() + ": raw_input_contents[" + std::to_string(raw_next) +
                               "] has " + std::to_string(raw->size()) + " bytes; " +
                               Header(*dt, t) + " needs " + std::to_string(nbytes) +
                               " (elements x itemsize)");
      t.mutable_inline_data()->swap(*raw);  // moved: the request is ours
      ++raw_next;
    } else if (nbytes > 0) {
      return InvalidArgument(what() + " has no data: send its " + std::to_string(nbytes) +
                             " bytes in raw_input_contents, in contents, or in a registered "
                             "shared-memory region");
    }
  }
  if (raw_next != raw_count)
    return InvalidArgument("the request has " + std::to_string(raw_count) +
                           " raw_input_contents, but " + std::to_string(raw_next) +
                           " inputs take one (an input in shared memory or in contents takes "
                           "none)");
  return Status::Ok();
}

Status DecodeOutputs(const inference::ModelInferRequest& req, const OpDef& op,
                     const RegionLookup& regions, v1::ExecuteRequest* out, InferState* st) {
  if (req.outputs_size() == 0) {  // every output, in the schema's order
    for (size_t i = 0; i < op.outputs.size(); ++i)
      st->outputs.push_back(InferState::Output{static_cast<int>(i), "", 0});
    return Status::Ok();
  }
  if (static_cast<size_t>(req.outputs_size()) > op.outputs.size())
    return InvalidArgument(op.name + ": the request asks for " +
                           std::to_string(req.outputs_size()) + " outputs; the model has " +
                           std::to_string(op.outputs.size()) + ": " + OutputNames(op));
  std::set<int> seen;
  for (const auto& o : req.outputs()) {
    const std::string& name = o.name();
    auto what = [&] { return op.name + ": output " + Quote(name); };
    const int idx = op.OutputIndex(name);
    if (idx < 0)
      return InvalidArgument(op.name + ": unknown output " + Quote(name) + "; outputs are " +
                             OutputNames(op));
    if (!seen.insert(idx).second) return InvalidArgument(what() + " is asked for twice");
    ShmParams shm;
    KERNELD_RETURN_IF_ERROR(ParseShm(o.parameters(), what, /*output=*/true, &shm));
    if (!shm.region.empty()) {
      // Placed with its header left to the op (request_decode.cc): the
      // registry bounds it by the region; EncodeInfer by the byte size.
      v1::Tensor& t = (*out->mutable_outputs())[name];
      KERNELD_RETURN_IF_ERROR(ResolveRegion(regions, what, shm, 0, t.mutable_buffer()));
    }
    st->outputs.push_back(InferState::Output{idx, shm.region, shm.byte_size});
  }
  return Status::Ok();
}

}  // namespace

bool IsProtocolParameter(const std::string& name) {
  return name == "priority" || name == "timeout" || name == "sequence_id" ||
         name == "sequence_start" || name == "sequence_end" || name == "headers" ||
         name == "binary_data_output" || name.rfind("triton_", 0) == 0;
}

Status DecodeInfer(inference::ModelInferRequest* req, const InferOptions& opt,
                   const RegionLookup& regions, v1::ExecuteRequest* out, InferState* st) {
  const OpDef* op = nullptr;
  KERNELD_RETURN_IF_ERROR(FindModel(req->model_name(), req->model_version(), opt.test_ops, &op));
  st->op = op;
  st->id = req->id();
  out->set_op(op->name);
  out->set_request_id(req->id());
  KERNELD_RETURN_IF_ERROR(DecodeParameters(*req, out));
  KERNELD_RETURN_IF_ERROR(DecodeInputs(req, *op, regions, out, st));
  return DecodeOutputs(*req, *op, regions, out, st);
}

Status EncodeInfer(v1::ExecuteResponse* resp, const InferState& st,
                   inference::ModelInferResponse* out) {
  const OpDef& op = *st.op;
  out->set_model_name(op.name);
  out->set_model_version(kModelVersion);
  out->set_id(st.id);
  // Typed only where every output answered in the response has a field.
  bool typed = st.typed;
  for (const auto& o : st.outputs) {
    if (!typed || !o.region.empty()) continue;
    auto it = resp->outputs().find(op.outputs[static_cast<size_t>(o.index)].name);
    if (it != resp->outputs().end() && it->second.data_case() != v1::Tensor::kBuffer &&
        TypedField(FromProto(it->second.dtype())) == nullptr)
      typed = false;
  }
  for (const auto& o : st.outputs) {
    const OutputDef& od = op.outputs[static_cast<size_t>(o.index)];
    auto it = resp->mutable_outputs()->find(od.name);
    if (it == resp->mutable_outputs()->end())
      return Internal(op.name + ": output '" + od.name + "' is missing from the result");
    v1::Tensor& t = it->second;
    const DType dt = FromProto(t.dtype());
    auto* ot = out->add_outputs();
    ot->set_name(od.name);
    ot->set_datatype(std::string(DatatypeOf(dt)));
    ot->mutable_shape()->Add(t.shape().begin(), t.shape().end());
    if (t.data_case() == v1::Tensor::kBuffer) {
      // In the client's region: its own, or its input's (written in place).
      std::string region = o.region;
      if (region.empty() && !od.in_place_of.empty()) {
        auto in = st.input_regions.find(od.in_place_of);
        if (in != st.input_regions.end()) region = in->second;
      }
      if (!o.region.empty()) {
        const int64_t nbytes =
            CheckedBytes(Shape(t.shape().begin(), t.shape().end()), dt).value_or(0);
        if (static_cast<uint64_t>(nbytes) > o.shm_byte_size)
          return InvalidArgument(op.name + ": output '" + od.name + "' is " + Header(dt, t) + ", " +
                                 std::to_string(nbytes) +
                                 " bytes; its shared_memory_byte_size is " +
                                 std::to_string(o.shm_byte_size));
      }
      (*ot->mutable_parameters())["shared_memory_region"].set_string_param(region);
      if (!typed) out->add_raw_output_contents();  // keeps raw index == output index
      continue;
    }
    if (typed)
      UnpackContents(t.inline_data(), dt, ot->mutable_contents());
    else
      out->add_raw_output_contents()->swap(*t.mutable_inline_data());
  }
  return Status::Ok();
}

}  // namespace kerneld::server::kserve
