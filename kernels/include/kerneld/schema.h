// An op's schema (OpDef): its inputs, outputs and attrs, extra checks, its
// float64 reference, bench shapes and the impls registered for it. Each op
// declares it once, in kernels/ops/<op>/<op>.cc (kerneld/registry.h says how).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kerneld/attr.h"
#include "kerneld/bench_spec.h"
#include "kerneld/dtype.h"
#include "kerneld/host_tensor.h"
#include "kerneld/impl.h"
#include "kerneld/output_rule.h"
#include "kerneld/shape_pattern.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld {

// How a client draws a random value for an input that the op accepts and
// that means something (kernelctl run, ListKernels' TensorSpec.generation):
// the shape rule says what is valid, this says what is sensible. Values
// are kept (clients and the proto match on them); add, never renumber.
enum class InputGen {
  kUniform = 0,        // floating: uniform in [-2, 2); integer: 0 or 1
  kProbabilities = 1,  // non-negative, each row (last dim) sums to 1
  kIndex = 2,          // integers in [0, the value of symbol gen_upper)
  // Offsets of gen_shape's segments (one dim: the segment count) into the
  // value of symbol gen_upper items, the segments as even as they divide:
  // segments + 1 entries, entry b = b * upper / segments (an indptr).
  kIndptr = 3,
  kLength = 4,       // integers in [1, the value of symbol gen_upper] (last_page_len)
  kPermutation = 5,  // distinct integers in [0, upper) while they last, then again (page numbers)
  // Entry i of n: its segment when the n entries split in order, as evenly
  // as they divide, into the value of symbol gen_upper: i * upper / n.
  kSegment = 6,
  kModulo = 7,  // entry i: i mod the value of symbol gen_upper (positions)
};

struct InputDef {
  std::string name;
  DTypeSet dtypes;
  ShapePattern shape;
  std::string doc;
  InputGen gen = InputGen::kUniform;
  std::string gen_upper;  // all but kUniform and kProbabilities: the shape symbol ("max_position")
  // The shape a client makes, a pattern over symbols earlier inputs bind,
  // where `shape` leaves a dim free ("[K, K]" for gemm's b; a rope cache
  // "[num_tokens, head_dim]"); "" makes what `shape` says.
  std::string gen_shape;
};

struct OutputDef {
  std::string name;
  OutputRule rule;
  // Input this output is written into (in-place ops: the output *is* the
  // input; clients get the input's reference or bytes back).
  std::string in_place_of;
  // Input the output may share memory with (the kernel tolerates y == x).
  std::string may_alias;
  std::string doc;
};

// An op's structural dimensions for the scheduler's tuning buckets
// (server/scheduler/shape_bucket.h): their names, and how to read them from
// a validated request (fills dims[0 .. names.size())). Each is bucketed to
// the next power of two. Optional: an op that declares none is bucketed by
// its inputs' total element count.
inline constexpr int kMaxTuneDims = 6;
using TuneDimsFn = std::function<void(const KernelContext& ctx, int64_t* dims)>;
struct TuneDims {
  std::vector<std::string> names;  // "M", "N", "K"; at most kMaxTuneDims
  TuneDimsFn of;
};

using CheckFn = std::function<Status(const OpDef&, const std::vector<TensorView>& inputs,
                                     const AttrMap& attrs, ShapeBindings* bind)>;

// The op's outputs from its inputs in float64: the oracle of the unit and
// GPU tests, `kernelctl run --check` and the bench's self-check. False (with
// *error) when the inputs are unusable. Random ops (sampling) have none;
// their tests check support and distribution instead.
using ReferenceFn = std::function<bool(const HostTensors& inputs, const AttrMap& attrs,
                                       HostTensors* outputs, std::string* error)>;

struct OpDef {
  std::string name;
  std::string doc;
  std::vector<InputDef> inputs;
  std::vector<OutputDef> outputs;
  std::vector<AttrDef> attrs;
  std::vector<ImplDef> impls;
  std::vector<CheckFn> checks;  // extra validation after shape matching
  std::vector<std::pair<std::string, std::string>> same_dtype;  // input pairs
  ReferenceFn reference;                                        // empty: no deterministic reference
  BenchSpec bench;  // bench.shapes empty: kernel_bench skips the op
  TuneDims tune_dims;  // names empty: tuning buckets by element count

  explicit OpDef(std::string n) : name(std::move(n)) {}

  // Ops named "_test_*" exist for tests only; servers hide them by default.
  bool test_only() const { return name.rfind("_test", 0) == 0; }

  OpDef& Doc(std::string d) {
    doc = std::move(d);
    return *this;
  }
  OpDef& Input(std::string n, DTypeSet dts, const std::string& shape = "[...]", std::string d = "");
  // How clients generate the input declared last (InputGen): every kind but
  // kUniform and kProbabilities takes the symbol bounding its values. Aborts when no input is
  // declared yet.
  OpDef& Gen(InputGen kind, std::string upper = "");
  // The shape clients generate for the input declared last (InputDef::gen_shape).
  OpDef& GenShape(const std::string& pattern);
  OpDef& Output(std::string n, OutputRule rule, std::string d = "");
  OpDef& InPlace(const std::string& output, const std::string& input);
  OpDef& MayAlias(const std::string& output, const std::string& input);
  // A required attr.
  OpDef& Attr(std::string n, AttrType t, std::string d = "");
  // An optional attr with its default.
  OpDef& AttrWithDefault(std::string n, AttrType t, AttrValue default_value, std::string d = "");
  OpDef& SameDType(const std::string& a, const std::string& b);
  OpDef& Check(CheckFn fn);
  OpDef& Reference(ReferenceFn fn);
  OpDef& Bench(BenchSpec spec);
  // The dims the scheduler's tuner buckets this op by (TuneDims). Aborts
  // on more than kMaxTuneDims names.
  OpDef& TuneBy(std::vector<std::string> names, TuneDimsFn fn);
  OpDef& Impl(std::string backend, KernelFn fn, Requirements req = Requirements::Cpu(),
              int priority = kPriorityFallback);

  int InputIndex(std::string_view n) const;   // -1 when absent
  int OutputIndex(std::string_view n) const;  // -1 when absent
  const AttrDef* FindAttr(std::string_view n) const;
  const ImplDef* FindImpl(std::string_view backend) const;
};

}  // namespace kerneld
