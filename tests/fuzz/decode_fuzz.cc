// decode_fuzz: bytes -> v1::ExecuteRequest -> DecodeRequest, the whole
// request decode and validation path up to where a task would be queued.
//
// A registry holds a few host regions so that buffer references resolve:
// the ids a request names are the placeholders "r0", "r1", "r2" (the
// anonymous principal's), "rx" (another principal's) and anything else
// (unknown), replaced by the registry's real ids before decoding. Test ops
// are served when the request's request_id starts with 't'.
// After a successful decode the first and last byte of every view is read
// (inputs) or written (outputs): with the regions allocated at their exact
// size, ASan sees any view that reaches past its region or its message.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "buffers/buffer_registry.h"
#include "kerneld/v1/kerneld.pb.h"
#include "service/memory_budget.h"
#include "service/request_decode.h"

namespace {

using kerneld::server::BufferRegistry;
using kerneld::server::Region;

struct Fixture {
  BufferRegistry reg{/*start_reaper=*/false};
  kerneld::server::MemoryBudget budget{int64_t{1} << 30};  // 1 GiB of inline bytes in flight
  std::string ids[4];                                      // r0, r1, r2, rx

  Fixture() {
    // Invalid UTF-8 in a string field is a parse failure, logged by
    // protobuf at every run: quiet.
    google::protobuf::SetLogHandler(nullptr);
    // r0: 64 KiB, r1: 4 KiB, r2: 100 bytes starting one byte past an
    // aligned address (like a shm region at offset 1), rx: someone else's.
    const uint64_t sizes[4] = {65536, 4096, 100, 4096};
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

  void MapIds(google::protobuf::Map<std::string, kerneld::v1::Tensor>* m) {
    for (auto& [_, t] : *m) {
      if (!t.has_buffer()) continue;
      const std::string& id = t.buffer().buffer_id();
      int idx = id == "r0" ? 0 : id == "r1" ? 1 : id == "r2" ? 2 : id == "rx" ? 3 : -1;
      if (idx >= 0) t.mutable_buffer()->set_buffer_id(ids[idx]);
    }
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
  static Fixture* fx = new Fixture();
  kerneld::v1::ExecuteRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size)))
    return -1;  // not a request: not in the corpus
  fx->MapIds(req.mutable_inputs());
  fx->MapIds(req.mutable_outputs());

  kerneld::server::DecodeOptions opt;
  opt.test_ops = !req.request_id().empty() && req.request_id()[0] == 't';
  opt.max_inline_out_bytes = int64_t{256} << 20;
  opt.budget = &fx->budget;
  kerneld::v1::ExecuteResponse resp;
  {
    kerneld::server::DecodedRequest d;
    kerneld::Status st =
        kerneld::server::DecodeRequest(req, &resp, opt, &fx->reg, kerneld::server::kAnonymous, &d);
    if (st.ok()) {
      if (d.call.op == nullptr) __builtin_trap();
      if (d.call.inputs.size() != d.call.op->inputs.size() || d.call.outputs.size() != d.call.op->outputs.size())
        __builtin_trap();
      for (const auto& v : d.call.inputs) Touch(v, false);
      for (auto& v : d.call.outputs) Touch(v, true);
    } else if (st.message().empty()) {
      __builtin_trap();  // every refusal says why
    }
  }
  // Every pin and every byte of budget is given back with the request.
  if (fx->budget.used() != 0) __builtin_trap();
  for (const auto& r : fx->reg.ListAll())
    if (r->inflight.load() != 0) __builtin_trap();
  return 0;
}
