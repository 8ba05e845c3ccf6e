// kernel_bench's attention problems (common/attention/bench.h) with their
// index arrays drawn as kernel_bench draws them (DrawBenchProblem,
// kerneld/input_gen.h): every named problem's arrays pass the impls' own
// index checks (indices.h) and its shapes the schema; small problems of the
// same shape rules run on the CPU and match the float64 reference; and the
// bytes and FLOPs hooks count what the drawn arrays say.
#include <gtest/gtest.h>

#include "common/attention/bench.h"
#include "common/attention/indices.h"
#include "kerneld/call.h"
#include "kerneld/input_gen.h"
#include "op_runner.h"

namespace kerneld::testing {
namespace {

const std::vector<std::string> kOps = {"batch_decode_paged", "batch_prefill_paged",
                                       "batch_prefill_ragged", "append_paged_kv_cache",
                                       "merge_state"};

std::vector<int32_t> Ints(const BenchProblem& p, const char* name) {
  return attention::BenchInts(p, name);
}

// The impls' host checks on the drawn arrays (no data needed).
Status CheckDrawn(const std::string& op, const BenchProblem& p) {
  const int64_t batch = p.shapes.count("kv_last_page_len") ? p.shapes.at("kv_last_page_len")[0]
                        : p.shapes.count("qo_indptr")      ? p.shapes.at("qo_indptr")[0] - 1
                                                           : 0;
  const std::vector<int32_t> qo = Ints(p, "qo_indptr"), kv = Ints(p, "kv_indptr");
  if (!qo.empty())
    KERNELD_RETURN_IF_ERROR(attention::CheckIndptr(op, "qo_indptr", qo.data(), batch,
                                                   p.shapes.at("q")[0], "rows of 'q'", true));
  if (op == "batch_prefill_ragged")
    return attention::CheckIndptr(op, "kv_indptr", kv.data(), batch, p.shapes.at("k")[0],
                                  "rows of 'k'", true);
  if (kv.empty()) return Status::Ok();
  const std::vector<int32_t> ix = Ints(p, "kv_indices"), last = Ints(p, "kv_last_page_len");
  const attention::PagedIndex idx{kv.data(),
                                  ix.data(),
                                  last.data(),
                                  batch,
                                  static_cast<int64_t>(ix.size()),
                                  p.shapes.at("k_cache")[0],
                                  p.shapes.at("k_cache")[1]};
  KERNELD_RETURN_IF_ERROR(attention::CheckPaged(op, idx));
  if (op != "append_paged_kv_cache") return Status::Ok();
  const std::vector<int32_t> b = Ints(p, "batch_indices"), pos = Ints(p, "positions");
  return attention::CheckAppend(op, idx, b.data(), pos.data(), static_cast<int64_t>(pos.size()));
}

// Views of the problem's shapes (no data) through the schema's validation.
Status ValidateShapes(const OpDef& op, const BenchProblem& p) {
  KernelContext ctx;
  for (const InputDef& in : op.inputs) {
    TensorView v;
    v.dtype = p.index.count(in.name)        ? p.index.at(in.name).dtype
              : in.dtypes.Contains(p.dtype) ? p.dtype
                                            : DType::kFloat32;
    v.shape = p.shapes.at(in.name);
    ctx.inputs.push_back(v);
  }
  std::vector<OutputSpec> specs;
  return Prepare(op, p.attrs, &ctx, &specs);
}

TEST(AttentionBench, EveryNamedProblemDrawsValidIndices) {
  int checked = 0;
  for (const std::string& name : kOps) {
    const OpDef* op = OpRegistry::Global().Find(name);
    ASSERT_NE(op, nullptr) << name;
    ASSERT_FALSE(op->bench.extra.empty() && name != "merge_state") << name;
    for (const BenchSpec::Problem& pr : op->bench.extra) {
      SCOPED_TRACE(name + " " + pr.name);
      const auto shapes = op->bench.shapes(pr.rows, pr.hidden);
      if (shapes.empty()) continue;  // too large for any GPU: kernel_bench skips it
      std::mt19937_64 rng(1);
      const BenchProblem p = DrawBenchProblem(*op, shapes, DType::kBFloat16, rng);
      EXPECT_EQ(ValidateShapes(*op, p).ToString(), Status::Ok().ToString());
      EXPECT_EQ(CheckDrawn(name, p).ToString(), Status::Ok().ToString());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16 + 2 * 6 + 3);  // decode, the prefills, the append
}

// Small problems of the bench's rules, drawn the same way, through the CPU
// impl against the float64 reference.
TEST(AttentionBench, SmallProblemsRunOnTheCpu) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{3, 40}, {2, 17}, {4, 1}, {2, 16}};
  std::mt19937_64 data(7);
  int ran = 0;
  for (const std::string& name : kOps) {
    const OpDef* op = OpRegistry::Global().Find(name);
    for (auto [rows, hidden] : sizes) {
      SCOPED_TRACE(name + " " + std::to_string(rows) + "x" + std::to_string(hidden));
      auto shapes = op->bench.shapes(rows, name == "merge_state" ? hidden * 128 : hidden);
      if (shapes.empty()) continue;
      // Fewer heads (4 query heads over 2 kv heads): the reference is
      // float64 over every (row, head, key).
      for (auto& [in, shape] : shapes) {
        if (in == "q") shape[1] = 4;
        if (in == "k_cache" || in == "v_cache") shape[2] = 2;
        if (in == "k" || in == "v" || in == "append_key" || in == "append_value") shape[1] = 2;
      }
      std::mt19937_64 rng(1);
      const BenchProblem p = DrawBenchProblem(*op, shapes, DType::kBFloat16, rng);
      HostTensors in;
      for (const InputDef& def : op->inputs) {
        if (auto it = p.index.find(def.name); it != p.index.end()) {
          in[def.name] = it->second;
        } else {
          const DType dt = def.dtypes.Contains(p.dtype) ? p.dtype : DType::kFloat32;
          in[def.name] = Random(dt, shapes.at(def.name), data);
        }
      }
      OpRun r = RunOnCpu(name, in, p.attrs);
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(CheckAgainstReference(name, in, p.attrs, r.outputs), "");
      ++ran;
    }
  }
  EXPECT_EQ(ran, 4 + 2 * 4 + 2 + 4);  // decode, the prefills, the append, merge_state
}

TEST(AttentionBench, BytesAndFlopsCountTheDrawnArrays) {
  // Ragged prefill, causal, qo_len = kv_len = L in each of B requests: every
  // row i sees i + 1 keys.
  const OpDef* ragged = OpRegistry::Global().Find("batch_prefill_ragged");
  std::mt19937_64 rng(1);
  const int64_t batch = 2, len = 64;
  BenchProblem p =
      DrawBenchProblem(*ragged, ragged->bench.shapes(batch, len), DType::kFloat16, rng);
  const double hd = static_cast<double>(attention::kBenchHq * attention::kBenchD);
  EXPECT_DOUBLE_EQ(ragged->bench.flops(p), 4 * hd * batch * (len * (len + 1) / 2));
  p.attrs["causal"] = false;
  EXPECT_DOUBLE_EQ(ragged->bench.flops(p), 4 * hd * batch * len * len);

  // Decode: the slots the requests hold, by their drawn last page lengths.
  const OpDef* decode = OpRegistry::Global().Find("batch_decode_paged");
  p = DrawBenchProblem(*decode, decode->bench.shapes(3, 40), DType::kFloat16, rng);
  const std::vector<int32_t> last = Ints(p, "kv_last_page_len");
  int64_t keys = 0;
  for (int32_t l : last) keys += 2 * attention::kBenchPage + l;      // 3 pages each
  const double row = attention::kBenchHkv * attention::kBenchD * 2;  // bytes of one head row
  const double q = 3 * hd * 2;
  EXPECT_DOUBLE_EQ(decode->bench.bytes(p),
                   2 * q + 3 * attention::kBenchHq * 4 + 4 * (4 + 9 + 3) + 2 * keys * row);
}

}  // namespace
}  // namespace kerneld::testing
