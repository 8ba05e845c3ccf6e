// Decoding one ExecuteRequest into the call a kernel runs on: op lookup,
// attrs, inputs (inline or buffer references, bounds-checked and pinned),
// schema validation and output inference (kerneld/call.h), the size limits,
// and the outputs' memory in the response or the client's buffers, laid
// out by the library's LayOutOutputs with its aliasing rules; all before
// anything is queued. Everything a client sends is
// untrusted here; the fuzzer (tests/fuzz/decode_fuzz.cc) drives this entry
// point directly.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "buffers/buffer_registry.h"
#include "kerneld/call.h"
#include "kerneld/v1/kerneld.pb.h"
#include "service/memory_budget.h"

namespace kerneld::server {

// Memory a request owns while it runs: realigned copies of inline inputs.
struct Scratch {
  struct AlignedDelete {
    // Allocated with an alignment, so freed with the same one.
    void operator()(char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::vector<std::unique_ptr<char[], AlignedDelete>> blocks;
  char* Alloc(size_t n) {
    // 64-byte aligned, as the vectorized CPU kernels like it.
    blocks.emplace_back(new (std::align_val_t{64}) char[n > 0 ? n : 1]);
    return blocks.back().get();
  }
};

// The decoded call: the first of the request's three forms (then the Task,
// then the response). Its call (op, attrs, views; kerneld/call.h) is what
// the kernel runs: the scheduler reads it in place and the Task takes it by
// move; the rest is the memory the call uses, held until the response.
struct DecodedRequest {
  KernelContext call;
  Scratch scratch;
  std::vector<RegionPin> pins;  // regions this request uses, held until it completes
  MemoryBudget::Lease memory;   // its share of --max_inflight_mb
  uint64_t bytes_in_inline = 0, bytes_in_buffer = 0, bytes_out_inline = 0, bytes_out_buffer = 0;
};

struct DecodeOptions {
  bool test_ops = false;             // serve "_test_*" ops
  int64_t max_inline_out_bytes = 0;  // sum of inline outputs (--max_message_mb)
  MemoryBudget* budget = nullptr;    // nullptr: unbounded (tests, fuzzing)
};

// Fills *d and the response's output headers (and inline output bytes) from
// `req`, or returns the status to answer with. Never throws on client input:
// every size is checked before it is allocated.
Status DecodeRequest(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                     const DecodeOptions& opt, BufferRegistry* reg, const Principal& who,
                     DecodedRequest* d);

}  // namespace kerneld::server
