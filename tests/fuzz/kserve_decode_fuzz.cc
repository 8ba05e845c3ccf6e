// kserve_decode_fuzz: bytes -> inference::ModelInferRequest -> DecodeInfer
// (the KServe front end's decoder, server/kserve/infer_codec.h) ->
// DecodeRequest (kerneld.v1's decode, validation and output layout) ->
// EncodeInfer on the laid-out result: the whole way a ModelInfer takes up
// to where a task would be queued, and back.
//
// Shared-memory region names "r0", "r1", "r2" name host regions of a
// registry (64 KiB, 4 KiB, and 100 bytes at an odd address), "rx" another
// principal's buffer, anything else no region. Test ops are served when the
// request's id starts with 't'. After a successful decode the first and
// last byte of every view is read (inputs) or written (outputs), so ASan
// sees a view past its region or its message; every pin and budget byte
// is given back, and every refusal says why.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "buffers/buffer_registry.h"
#include "inference/grpc_service.pb.h"
#include "kserve/infer_codec.h"
#include "service/memory_budget.h"
#include "service/request_decode.h"

namespace {

using kerneld::server::BufferRegistry;
using kerneld::server::Region;

struct Fixture {
  BufferRegistry reg{/*start_reaper=*/false};
  kerneld::server::MemoryBudget budget{int64_t{1} << 30};
  std::string ids[4];  // r0, r1, r2, rx
  uint64_t sizes[4] = {65536, 4096, 100, 4096};

  Fixture() {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is a parse failure: quiet
    const uint64_t skew[4] = {0, 0, 1, 0};
    for (int i = 0; i < 4; ++i) {
      auto r = std::make_shared<Region>();
      char* mem = new char[sizes[i] + skew[i]];
      std::memset(mem, 0x3c, sizes[i] + skew[i]);
      r->base = mem + skew[i];
      r->size = sizes[i];
      r->device = kerneld::Device::Cpu();
      r->device_uuid = "cpu";
      r->owner = i == 3 ? "mallory" : kerneld::server::kAnonymous;
      r->release = [mem] { delete[] mem; };
      ids[i] = reg.Add(std::move(r));
    }
  }

  kerneld::Status Lookup(const std::string& name, kerneld::server::kserve::RegionRef* out) const {
    const int idx = name == "r0" ? 0 : name == "r1" ? 1 : name == "r2" ? 2 : name == "rx" ? 3 : -1;
    if (idx < 0) return kerneld::NotFound("no shared-memory region " + kerneld::Quote(name));
    out->buffer_id = ids[idx];
    out->byte_size = sizes[idx];
    return kerneld::Status::Ok();
  }
};

volatile char sink;

void Touch(const kerneld::TensorView& v, bool write) {
  const int64_t n = v.nbytes();
  if (n <= 0 || v.data == nullptr) return;
  char* p = static_cast<char*>(const_cast<void*>(v.raw()));
  if (write) {
    p[0] = 1;
    p[n - 1] = 2;
  } else {
    sink = static_cast<char>(p[0] + p[n - 1]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ks = kerneld::server::kserve;
  static Fixture* fx = new Fixture();
  inference::ModelInferRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return -1;  // not a request
  ks::InferOptions opt;
  opt.test_ops = !req.id().empty() && req.id()[0] == 't';
  const ks::RegionLookup lookup = [](const std::string& name, ks::RegionRef* out) {
    return fx->Lookup(name, out);
  };
  {
    kerneld::v1::ExecuteRequest exec;
    ks::InferState state;
    kerneld::Status st = ks::DecodeInfer(&req, opt, lookup, &exec, &state);
    if (!st.ok() && st.message().empty()) __builtin_trap();  // every refusal says why
    if (st.ok()) {
      if (state.op == nullptr || state.outputs.empty()) __builtin_trap();
      kerneld::server::DecodeOptions dopt;
      dopt.test_ops = opt.test_ops;
      dopt.max_inline_out_bytes = int64_t{256} << 20;
      dopt.budget = &fx->budget;
      kerneld::v1::ExecuteResponse resp;
      kerneld::server::DecodedRequest d;
      st = kerneld::server::DecodeRequest(exec, &resp, dopt, &fx->reg, kerneld::server::kAnonymous,
                                          &d);
      if (!st.ok() && st.message().empty()) __builtin_trap();
      if (st.ok()) {
        for (const auto& v : d.call.inputs) Touch(v, false);
        for (auto& v : d.call.outputs) Touch(v, true);
        inference::ModelInferResponse answer;
        st = ks::EncodeInfer(&resp, state, &answer);
        if (!st.ok() && st.message().empty()) __builtin_trap();
        if (st.ok()) {
          if (answer.outputs_size() != static_cast<int>(state.outputs.size())) __builtin_trap();
          if (answer.raw_output_contents_size() != 0 &&
              answer.raw_output_contents_size() != answer.outputs_size())
            __builtin_trap();  // raw entries index the outputs
        }
      }
    }
  }
  if (fx->budget.used() != 0) __builtin_trap();
  for (const auto& r : fx->reg.ListAll())
    if (r->inflight.load() != 0) __builtin_trap();
  return 0;
}
