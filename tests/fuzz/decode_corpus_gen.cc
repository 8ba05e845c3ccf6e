// Writes the decode_fuzz seed corpus: serialized ExecuteRequests, one file
// per request, for every op (valid requests with inline data, requests
// whose tensors are buffer references into decode_fuzz's regions "r0",
// "r1", "r2" and someone else's "rx", placed outputs, attrs of every type)
// and the known bad ones (size overflows, the gemm crash of issue
// "crash-proof"). Usage: decode_corpus_gen OUT_DIR
// (scripts/fuzz_corpus regenerates tests/fuzz/corpus/decode_fuzz).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kerneld/v1/kerneld.pb.h"

namespace {

namespace v1 = kerneld::v1;

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int ItemSize(v1::DType dt) {
  switch (dt) {
    case v1::DTYPE_FLOAT16:
    case v1::DTYPE_BFLOAT16:
    case v1::DTYPE_INT16:
      return 2;
    case v1::DTYPE_FLOAT32:
    case v1::DTYPE_INT32:
      return 4;
    case v1::DTYPE_FLOAT64:
    case v1::DTYPE_INT64:
      return 8;
    default:
      return 1;
  }
}

// Inline tensor of small, valid values (1.0 in every float type; 0 for ints).
v1::Tensor Inline(v1::DType dt, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(dt);
  for (int64_t s : shape) t.add_shape(s);
  std::string bytes(static_cast<size_t>(Numel(shape) * ItemSize(dt)), '\0');
  for (size_t i = 0; i + ItemSize(dt) <= bytes.size(); i += static_cast<size_t>(ItemSize(dt))) {
    if (dt == v1::DTYPE_FLOAT32) bytes.replace(i, 4, std::string("\x00\x00\x80\x3f", 4));
    if (dt == v1::DTYPE_FLOAT16) bytes.replace(i, 2, std::string("\x00\x3c", 2));
    if (dt == v1::DTYPE_BFLOAT16) bytes.replace(i, 2, std::string("\x80\x3f", 2));
  }
  t.set_inline_data(bytes);
  return t;
}

v1::Tensor Ref(v1::DType dt, std::vector<int64_t> shape, const std::string& id, uint64_t offset) {
  v1::Tensor t;
  t.set_dtype(dt);
  for (int64_t s : shape) t.add_shape(s);
  t.mutable_buffer()->set_buffer_id(id);
  t.mutable_buffer()->set_offset(offset);
  return t;
}

v1::Tensor Header(v1::DType dt, std::vector<int64_t> shape) {
  v1::Tensor t;
  t.set_dtype(dt);
  for (int64_t s : shape) t.add_shape(s);
  return t;
}

struct Corpus {
  std::string dir;
  int n = 0;
  void Put(const std::string& name, const v1::ExecuteRequest& r) {
    std::ofstream(dir + "/" + name, std::ios::binary) << r.SerializeAsString();
    ++n;
  }
  void PutRaw(const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    ++n;
  }
};

v1::ExecuteRequest Req(const std::string& op) {
  v1::ExecuteRequest r;
  r.set_op(op);
  return r;
}

void In(v1::ExecuteRequest* r, const std::string& name, v1::Tensor t) {
  (*r->mutable_inputs())[name] = std::move(t);
}
void Out(v1::ExecuteRequest* r, const std::string& name, v1::Tensor t) {
  (*r->mutable_outputs())[name] = std::move(t);
}
void AttrF(v1::ExecuteRequest* r, const std::string& name, double v) {
  (*r->mutable_attrs())[name].set_f(v);
}
void AttrI(v1::ExecuteRequest* r, const std::string& name, int64_t v) {
  (*r->mutable_attrs())[name].set_i(v);
}
void AttrB(v1::ExecuteRequest* r, const std::string& name, bool v) {
  (*r->mutable_attrs())[name].set_b(v);
}
void AttrS(v1::ExecuteRequest* r, const std::string& name, const std::string& v) {
  (*r->mutable_attrs())[name].set_s(v);
}

std::string FromHex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: decode_corpus_gen OUT_DIR\n");
    return 2;
  }
  Corpus c{argv[1]};
  const v1::DType kFloats[] = {v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT16, v1::DTYPE_BFLOAT16};
  const char* kFloatNames[] = {"f32", "f16", "bf16"};

  for (int k = 0; k < 3; ++k) {
    const v1::DType dt = kFloats[k];
    const std::string s = kFloatNames[k];
    // Element-wise.
    auto r = Req("scale");
    In(&r, "x", Inline(dt, {2, 3}));
    AttrF(&r, "factor", 2.0);
    c.Put("scale_" + s, r);
    r = Req("add");
    In(&r, "a", Inline(dt, {5}));
    In(&r, "b", Inline(dt, {5}));
    c.Put("add_" + s, r);
    // Row ops.
    r = Req("rmsnorm");
    In(&r, "x", Inline(dt, {2, 8}));
    In(&r, "weight", Inline(dt, {8}));
    AttrF(&r, "eps", 1e-6);
    AttrF(&r, "weight_bias", 1.0);
    c.Put("rmsnorm_" + s, r);
    r = Req("fused_add_rmsnorm");
    In(&r, "x", Inline(dt, {2, 8}));
    In(&r, "residual", Inline(dt, {2, 8}));
    In(&r, "weight", Inline(dt, {8}));
    c.Put("fused_add_rmsnorm_" + s, r);
    r = Req("layernorm");
    In(&r, "x", Inline(dt, {3, 4}));
    In(&r, "gamma", Inline(dt, {4}));
    In(&r, "beta", Inline(dt, {4}));
    AttrF(&r, "eps", 1e-5);
    c.Put("layernorm_" + s, r);
    for (const char* act : {"silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"}) {
      r = Req(act);
      In(&r, "x", Inline(dt, {2, 8}));
      c.Put(std::string(act) + "_" + s, r);
    }
    r = Req("rope");
    In(&r, "q", Inline(dt, {2, 2, 8}));
    In(&r, "k", Inline(dt, {2, 1, 8}));
    In(&r, "positions", Inline(v1::DTYPE_INT64, {2}));
    In(&r, "cos_sin_cache", Inline(v1::DTYPE_FLOAT32, {4, 8}));
    AttrB(&r, "is_neox", k == 0);
    c.Put("rope_" + s, r);
    r = Req("softmax");
    In(&r, "logits", Inline(dt, {2, 7}));
    AttrF(&r, "temperature", 0.5);
    c.Put("softmax_" + s, r);
    r = Req("gemm");
    In(&r, "a", Inline(dt, {2, 3}));
    In(&r, "b", Inline(dt, {3, 4}));
    AttrB(&r, "transpose_b", false);
    AttrF(&r, "alpha", 1.0);
    c.Put("gemm_" + s, r);
    r = Req("gemm");
    In(&r, "a", Inline(dt, {1, 3}));
    In(&r, "b", Inline(dt, {4, 3}));
    AttrB(&r, "transpose_b", true);
    c.Put("gemm_tb_" + s, r);
  }
  auto r = Req("rope");
  In(&r, "q", Inline(v1::DTYPE_FLOAT32, {1, 1, 4}));
  In(&r, "k", Inline(v1::DTYPE_FLOAT32, {1, 1, 4}));
  In(&r, "positions", Inline(v1::DTYPE_INT32, {1}));
  In(&r, "cos_sin_cache", Inline(v1::DTYPE_FLOAT32, {2, 2}));
  c.Put("rope_int32_positions_rot_dim2", r);
  r = Req("top_k_top_p_sampling");
  In(&r, "probs", Inline(v1::DTYPE_FLOAT32, {2, 10}));
  AttrI(&r, "top_k", 3);
  AttrF(&r, "top_p", 0.9);
  AttrI(&r, "seed", 42);
  c.Put("top_k_top_p_sampling", r);

  // Test ops (request_id "t..." turns them on in decode_fuzz).
  for (const char* op : {"_test_sleep", "_test_fault"}) {
    r = Req(op);
    r.set_request_id("t1");
    In(&r, "x", Inline(v1::DTYPE_INT8, {3}));
    if (std::string(op) == "_test_sleep") AttrF(&r, "ms", 0);
    c.Put(std::string(op).substr(1), r);
  }
  r = Req("_test_sleep");
  In(&r, "x", Inline(v1::DTYPE_UINT8, {3}));
  c.Put("test_sleep_hidden", r);  // not served: NOT_FOUND

  // Buffer references: inputs, placed outputs, in place in a buffer,
  // aliasing, misaligned offsets, out of bounds, foreign and unknown ids.
  r = Req("scale");
  In(&r, "x", Ref(v1::DTYPE_FLOAT32, {16}, "r0", 0));
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r0", 64));
  AttrF(&r, "factor", 3.0);
  r.set_backend("cpu");
  r.set_device("cpu");
  c.Put("scale_buffers", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r0", 0));
  c.Put("scale_buffers_alias", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r0", 32));
  c.Put("scale_buffers_partial_overlap", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r1", 4096 - 64));
  c.Put("scale_buffers_end_of_r1", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r1", 4096 - 60));
  c.Put("scale_buffers_past_end", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r1", 2));
  c.Put("scale_buffers_misaligned", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "r1", ~uint64_t{0} - 7));
  c.Put("scale_buffers_offset_wraps", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "rx", 0));
  c.Put("scale_buffers_foreign", r);
  Out(&r, "y", Ref(v1::DTYPE_FLOAT32, {16}, "buf-1-00000000", 0));
  c.Put("scale_buffers_unknown", r);
  Out(&r, "y", Header(v1::DTYPE_FLOAT32, {16}));
  c.Put("scale_buffers_output_header_only", r);
  Out(&r, "y", Inline(v1::DTYPE_FLOAT32, {16}));
  c.Put("scale_output_inline_refused", r);
  r = Req("add");
  In(&r, "a", Ref(v1::DTYPE_FLOAT16, {50}, "r2", 0));
  In(&r, "b", Inline(v1::DTYPE_FLOAT16, {50}));
  Out(&r, "y", Ref(v1::DTYPE_FLOAT16, {50}, "r2", 0));
  c.Put("add_r2_unaligned_base", r);
  r = Req("fused_add_rmsnorm");
  In(&r, "x", Ref(v1::DTYPE_BFLOAT16, {2, 8}, "r0", 0));
  In(&r, "residual", Ref(v1::DTYPE_BFLOAT16, {2, 8}, "r0", 32));
  In(&r, "weight", Ref(v1::DTYPE_BFLOAT16, {8}, "r1", 0));
  c.Put("fused_add_rmsnorm_in_place_buffers", r);
  In(&r, "residual", Ref(v1::DTYPE_BFLOAT16, {2, 8}, "r0", 16));
  c.Put("fused_add_rmsnorm_overlapping_in_place", r);
  Out(&r, "x", Ref(v1::DTYPE_BFLOAT16, {2, 8}, "r1", 0));
  c.Put("fused_add_rmsnorm_in_place_placed_refused", r);
  r = Req("rope");
  In(&r, "q", Ref(v1::DTYPE_FLOAT32, {2, 2, 8}, "r0", 0));
  In(&r, "k", Ref(v1::DTYPE_FLOAT32, {2, 1, 8}, "r0", 128));
  In(&r, "positions", Ref(v1::DTYPE_INT64, {2}, "r1", 0));
  In(&r, "cos_sin_cache", Ref(v1::DTYPE_FLOAT32, {4, 8}, "r1", 64));
  c.Put("rope_buffers", r);
  r = Req("gemm");
  In(&r, "a", Ref(v1::DTYPE_FLOAT32, {4, 8}, "r0", 0));
  In(&r, "b", Ref(v1::DTYPE_FLOAT32, {8, 4}, "r0", 128));
  Out(&r, "c", Ref(v1::DTYPE_FLOAT32, {4, 4}, "r1", 0));
  c.Put("gemm_buffers", r);
  r = Req("softmax");
  In(&r, "logits", Ref(v1::DTYPE_FLOAT32, {4, 1000}, "r0", 0));
  Out(&r, "probs", Ref(v1::DTYPE_FLOAT32, {4, 1000}, "r0", 16000));
  c.Put("softmax_buffers", r);
  r = Req("top_k_top_p_sampling");
  In(&r, "probs", Ref(v1::DTYPE_FLOAT32, {2, 10}, "r1", 0));
  Out(&r, "samples", Ref(v1::DTYPE_INT32, {2}, "r1", 80));
  c.Put("top_k_top_p_sampling_buffers", r);

  // Bad headers, bad attrs, sizes at the limits.
  r = Req("scale");
  In(&r, "x", Inline(v1::DTYPE_FLOAT32, {4}));
  AttrS(&r, "factor", "two");
  c.Put("scale_attr_wrong_type", r);
  AttrF(&r, "factor", 2);
  AttrI(&r, "nope", 1);
  c.Put("scale_attr_unknown", r);
  r = Req("scale");
  In(&r, "x", Header(v1::DTYPE_FLOAT32, {int64_t{1} << 62, 4}));
  AttrF(&r, "factor", 2);
  c.Put("scale_numel_overflow", r);
  In(&r, "x", Header(v1::DTYPE_FLOAT32, {-1}));
  c.Put("scale_negative_dim", r);
  In(&r, "x", Header(v1::DTYPE_FLOAT32, {0, 5}));
  c.Put("scale_zero_size_no_data", r);
  In(&r, "x", Header(v1::DTYPE_UNSPECIFIED, {4}));
  c.Put("scale_dtype_unspecified", r);
  In(&r, "x", Header(static_cast<v1::DType>(99), {4}));
  c.Put("scale_dtype_unknown_enum", r);
  In(&r, "x", Header(v1::DTYPE_FLOAT32, std::vector<int64_t>(40, 1)));
  c.Put("scale_rank_40", r);
  In(&r, "x", Ref(v1::DTYPE_FLOAT32, {1 << 20, 1 << 10}, "r0", 0));
  c.Put("scale_buffer_too_small", r);
  // c = a [8193, 1] x b [1, 16384] float16: an inline result just over 256 MiB.
  r = Req("gemm");
  In(&r, "a", Ref(v1::DTYPE_FLOAT16, {8193, 1}, "r0", 0));
  In(&r, "b", Ref(v1::DTYPE_FLOAT16, {1, 16384}, "r0", 32768));
  c.Put("gemm_inline_out_over_256MiB", r);
  r = Req("softmax");
  In(&r, "logits", Inline(v1::DTYPE_FLOAT32, {2, 3}));
  AttrF(&r, "temperature", 0);
  c.Put("softmax_temperature_zero", r);
  r = Req("top_k_top_p_sampling");
  In(&r, "probs", Inline(v1::DTYPE_FLOAT32, {1, 4}));
  AttrI(&r, "top_k", -1);
  AttrF(&r, "top_p", 2);
  c.Put("sampling_bad_attrs", r);
  r = Req("gemm");
  In(&r, "a", Inline(v1::DTYPE_FLOAT32, {2, 3}));
  In(&r, "b", Inline(v1::DTYPE_FLOAT16, {3, 4}));
  c.Put("gemm_mixed_dtypes", r);
  r = Req("gemm");
  In(&r, "a", Header(v1::DTYPE_FLOAT32, {int64_t{1} << 31, 0}));
  In(&r, "b", Header(v1::DTYPE_FLOAT32, {0, int64_t{1} << 31}));
  c.Put("gemm_huge_output_from_empty_inputs", r);
  r = Req("nope");
  c.Put("unknown_op", r);
  c.Put("empty_op", Req(""));
  // The crash of issue "crash-proof", byte for byte: gemm, b [0, 2^31],
  // a [2^31, 0] float32 with no data (an output of 2^62 elements).
  c.PutRaw(
      "issue_crash_gemm_overflow",
      FromHex("0a0467656d6d120f0a0162120a08031206008080808008120f0a0161120a08031206808080800800"));
  std::printf("decode_corpus_gen: %d inputs in %s\n", c.n, argv[1]);
  return 0;
}
