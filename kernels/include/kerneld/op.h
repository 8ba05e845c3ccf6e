// The op registry: one schema per op, implementations per backend, each
// registered by the file that defines it (PyTorch's TORCH_LIBRARY and one
// TORCH_LIBRARY_IMPL per backend file):
//
//   // kernels/ops/scale/scale.cc: the schema, its float64 reference, bench shapes
//   KERNELD_OP(scale) {
//     OpDef op("scale");
//     op.Doc("y = x * factor, element-wise")
//         .Input("x", kFloatingTypes, "[...]")
//         .Output("y", SameAs("x"))
//         .MayAlias("y", "x")
//         .Attr("factor", AttrType::kFloat, "multiplier");
//     return op;
//   }
//   // kernels/ops/scale/cpu.cc (cuda.cu likewise, compiled only with CUDA)
//   KERNELD_IMPL(scale, cpu) { op.Impl("cpu", ScaleCpu, Requirements::Cpu()); }
//
// A backend that is not built is not linked, so no file needs an #ifdef:
// kernels/CMakeLists.txt globs the op folders and links the library whole
// (static registrars in an archive would otherwise be dropped).
//
// Shape rules are small patterns: "[..., hidden_size]" binds the trailing dim
// to the symbol hidden_size (shared across inputs, so weight "[hidden_size]"
// must agree); "[rows, 2*d]" binds d from an even dim; "[...]" is any shape.
// Output shapes are patterns over the same symbols, or a function.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kerneld/dtype.h"
#include "kerneld/host_tensor.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld {

class ThreadPool;

// ----- attributes -----------------------------------------------------------

enum class AttrType { kFloat, kInt, kBool, kString };
std::string_view AttrTypeName(AttrType t);

using AttrValue = std::variant<double, int64_t, bool, std::string>;
using AttrMap = std::map<std::string, AttrValue, std::less<>>;
std::string AttrValueToString(const AttrValue& v);

struct AttrDef {
  std::string name;
  AttrType type = AttrType::kFloat;
  std::optional<AttrValue> default_value;  // none: the attr is required
  std::string doc;
};

// ----- shapes ---------------------------------------------------------------

// One dim of a pattern: "...", a constant, or coeff * symbol.
struct DimPattern {
  enum class Kind { kEllipsis, kConst, kSymbol } kind = Kind::kConst;
  int64_t value = 0;  // constant, or coefficient of the symbol
  std::string symbol;
};

struct ShapePattern {
  std::string text;  // as written, for docs and messages
  std::vector<DimPattern> dims;
  bool any = false;  // "" or "[...]" alone: anything goes

  // Parses "[..., 2*d]"; aborts on a malformed pattern (a programming error
  // caught by the registry test, never by a client).
  static ShapePattern Parse(const std::string& text);
};

// Symbol bindings collected while matching inputs; "..." binds the prefix.
struct ShapeBindings {
  std::map<std::string, int64_t, std::less<>> symbols;
  std::optional<Shape> ellipsis;
};

// ----- schema ---------------------------------------------------------------

// How a client draws a random value for an input that the op accepts and
// that means something (kernelctl run, ListKernels' TensorSpec.generation):
// the shape rule says what is valid, this says what is sensible. Values
// are kept (clients and the proto match on them); add, never renumber.
enum class InputGen {
  kUniform = 0,        // floating: uniform in [-2, 2); integer: 0 or 1
  kProbabilities = 1,  // non-negative, each row (last dim) sums to 1
  kIndex = 2,          // integers in [0, the value of symbol gen_upper)
};

struct InputDef {
  std::string name;
  DTypeSet dtypes;
  ShapePattern shape;
  std::string doc;
  InputGen gen = InputGen::kUniform;
  std::string gen_upper;  // kIndex: the shape symbol bounding the values ("max_position")
  // The shape a client makes, a pattern over symbols earlier inputs bind,
  // where `shape` leaves a dim free ("[K, K]" for gemm's b; a rope cache
  // "[num_tokens, head_dim]"); "" makes what `shape` says.
  std::string gen_shape;
};

struct OutputSpec {
  DType dtype = DType::kInvalid;
  Shape shape;
};

class KernelContext;
struct OpDef;

// Computes an output's dtype and shape from the validated inputs.
using OutputRuleFn =
    std::function<Status(const OpDef&, const std::vector<TensorView>& inputs, const AttrMap& attrs,
                         const ShapeBindings& bind, OutputSpec* out)>;

struct OutputRule {
  std::string description;  // "same as x", "[..., d] float32"
  OutputRuleFn fn;
};

// Output dtype and shape equal input `name`'s.
OutputRule SameAs(const std::string& name);
// Output shape from a pattern over bound symbols; dtype from input `dtype_of`.
OutputRule ShapeOf(const std::string& pattern, const std::string& dtype_of);
// Output shape from a pattern; fixed dtype.
OutputRule ShapeOf(const std::string& pattern, DType dtype);

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

// ----- implementations ------------------------------------------------------

// What an implementation needs from a device and a request.
struct Requirements {
  DeviceKind device_kind = DeviceKind::kCpu;
  int min_compute_capability = 0;
  int max_compute_capability = std::numeric_limits<int>::max();
  DTypeSet dtypes = DTypeSet::All();
  int alignment = 1;  // bytes, every tensor's first element
  int64_t max_elements = std::numeric_limits<int64_t>::max();  // per tensor
  // Extra predicate over the request: returns a reason when it cannot run it.
  std::function<std::optional<std::string>(const KernelContext&)> predicate;
  std::string predicate_doc;

  static Requirements Cpu() { return {}; }
  static Requirements Cuda(int min_cc = 70) {
    Requirements r;
    r.device_kind = DeviceKind::kCuda;
    r.min_compute_capability = min_cc;
    return r;
  }
  Requirements& When(std::string doc,
                     std::function<std::optional<std::string>(const KernelContext&)> p) {
    predicate_doc = std::move(doc);
    predicate = std::move(p);
    return *this;
  }

  // Human-readable: "cuda, compute capability >= 8.0, 16-byte aligned".
  std::string Describe() const;
  // nullopt when the device can host this impl at all (request-independent).
  std::optional<std::string> RejectDevice(const DeviceInfo& dev) const;
  // !RejectDevice(dev), without formatting the reason: the scheduler asks
  // it of every device on every request, and on a GPU host the CPU impls
  // are refused by every GPU (building that message cost each request
  // several allocations).
  bool AcceptsDevice(const DeviceInfo& dev) const;
  // nullopt when this request can run (device assumed eligible). With
  // `staged_on` a CUDA device, views in host memory are judged as the worker
  // will stage them there (fresh 256-byte aligned device memory): the
  // scheduler asks before staging, on the request's own views, with no copy.
  std::optional<std::string> RejectRequest(const KernelContext& ctx,
                                           const DeviceInfo* staged_on = nullptr) const;
};

using KernelFn = std::function<Status(KernelContext&)>;

// Static ranks (ImplDef::priority): higher wins among eligible impls. The
// portable CPU code is the fallback; a device kernel or vendor library
// outranks it wherever its device is eligible. Per-request exceptions are
// ImplDef::priority_for, beside the measurement that justifies them.
inline constexpr int kPriorityFallback = 0;  // cpu: runs anywhere
inline constexpr int kPriorityDevice = 10;   // a GPU kernel or library

struct ImplDef {
  std::string backend;  // "cpu", "cuda", "cublas", ...
  KernelFn fn;
  Requirements requires_;
  int priority = kPriorityFallback;  // higher wins among eligible impls (static ranking)
  // Optional: a different rank for some requests (shape, dtype, attrs), where
  // measurement says this impl is the faster one only there; nullopt keeps
  // `priority`. priority_doc says when, for ListKernels and the docs.
  std::function<std::optional<int>(const KernelContext&)> priority_for;
  std::string priority_doc;
  // Optional: per-thread set-up that would otherwise land on the first
  // request a worker thread runs (loading a library, creating a handle).
  // Each worker thread of a device this impl accepts calls it once at start,
  // with that device current; failures are left for requests to report.
  std::function<void(const DeviceInfo&)> thread_warm_up;

  int PriorityFor(const KernelContext& ctx) const {
    if (priority_for)
      if (auto p = priority_for(ctx)) return *p;
    return priority;
  }
};

// ----- op definition --------------------------------------------------------

using CheckFn = std::function<Status(const OpDef&, const std::vector<TensorView>& inputs,
                                     const AttrMap& attrs, ShapeBindings* bind)>;

// The op's outputs from its inputs in float64: the oracle of the unit and
// GPU tests, `kernelctl run --check` and the bench's self-check. False (with
// *error) when the inputs are unusable. Random ops (sampling) have none;
// their tests check support and distribution instead.
using ReferenceFn = std::function<bool(const HostTensors& inputs, const AttrMap& attrs,
                                       HostTensors* outputs, std::string* error)>;

// How kernel_bench sizes the op for a (rows, hidden) problem: each input's
// shape, the attrs, and the range its random floating inputs are drawn from.
struct BenchSpec {
  std::function<std::map<std::string, Shape>(int64_t rows, int64_t hidden)> shapes;
  AttrMap attrs;
  double lo = -1, hi = 1;
  bool range_per_hidden = false;  // [lo, hi) / hidden: probabilities of a row
  // Problems kernel_bench also runs for this op, beside the shared decode,
  // mid and large (softmax: decode batches of 32k-128k vocabularies).
  struct Problem {
    std::string name;
    int64_t rows, hidden;
  };
  std::vector<Problem> extra = {};  // default: none (and no -Wmissing-field-initializers)
};

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

  explicit OpDef(std::string n) : name(std::move(n)) {}

  // Ops named "_test_*" exist for tests only; servers hide them by default.
  bool test_only() const { return name.rfind("_test", 0) == 0; }

  OpDef& Doc(std::string d) {
    doc = std::move(d);
    return *this;
  }
  OpDef& Input(std::string n, DTypeSet dts, const std::string& shape = "[...]", std::string d = "");
  // How clients generate the input declared last (InputGen): kIndex takes
  // the symbol bounding its values. Aborts when no input is declared yet.
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
  OpDef& Impl(std::string backend, KernelFn fn, Requirements req = Requirements::Cpu(),
              int priority = kPriorityFallback);

  int InputIndex(std::string_view n) const;   // -1 when absent
  int OutputIndex(std::string_view n) const;  // -1 when absent
  const AttrDef* FindAttr(std::string_view n) const;
  const ImplDef* FindImpl(std::string_view backend) const;
};

// ----- kernel context -------------------------------------------------------

// Everything an implementation sees: validated views, resolved attrs (with
// defaults filled in), the device and, on CUDA, the stream to launch on.
class KernelContext {
 public:
  const OpDef* op = nullptr;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  AttrMap attrs;
  DeviceInfo device;
  void* stream = nullptr;      // cudaStream_t on CUDA devices
  ThreadPool* pool = nullptr;  // CPU intra-op parallelism

  const TensorView& input(std::string_view n) const;
  TensorView& output(std::string_view n);

  double attr_f(std::string_view n) const;
  int64_t attr_i(std::string_view n) const;
  bool attr_b(std::string_view n) const;
  const std::string& attr_s(std::string_view n) const;
};

// ----- registry -------------------------------------------------------------

class OpRegistry {
 public:
  // The process-wide registry: every op and impl that registered itself
  // (KERNELD_OP, KERNELD_IMPL), built on first use.
  static OpRegistry& Global();

  Status Register(OpDef op);
  const OpDef* Find(std::string_view name) const;
  std::vector<const OpDef*> List() const;     // sorted by name
  std::vector<std::string> Backends() const;  // union over ops, sorted
  // Backends() and every backend the library declares (KERNELD_BACKEND),
  // built into this binary or not: the names a request may use. Sorted.
  std::vector<std::string> KnownBackends() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> ops_;
};

// ----- static registration -------------------------------------------------

using OpDefineFn = OpDef (*)();
using ImplDefineFn = void (*)(OpDef& op);

// Run at static initialization; they only record the functions, which
// OpRegistry::Global() calls on first use: the schemas first, then every
// impl of the op (sorted by backend name, whatever the link order), so an
// impl never depends on the order of static initializers.
struct OpRegistrar {
  OpRegistrar(const char* id, OpDefineFn fn);
};
struct ImplRegistrar {
  ImplRegistrar(const char* op_id, const char* file, ImplDefineFn fn);
};
struct BackendRegistrar {
  explicit BackendRegistrar(const char* name);
};

// Declares a backend the library has sources for (kernels/src/backends.cc),
// so that a build without it answers "not built here", not "unknown".
#define KERNELD_BACKEND(name) \
  static const ::kerneld::BackendRegistrar kerneld_backend_registrar_##name(#name)

// Defines the op whose folder this file is in; `id` is the op's name (for
// the test ops, the name without its leading underscore).
#define KERNELD_OP(id)                                                                       \
  static ::kerneld::OpDef KerneldDefineOp_##id();                                            \
  static const ::kerneld::OpRegistrar kerneld_op_registrar_##id(#id, &KerneldDefineOp_##id); \
  static ::kerneld::OpDef KerneldDefineOp_##id()

// Adds one backend's impls to op `id` (the body sees `OpDef& op` and calls
// op.Impl(...)); `backend` names the registration, one per file.
#define KERNELD_IMPL(id, backend)                                                \
  static void KerneldDefineImpl_##id##_##backend(::kerneld::OpDef& op);          \
  static const ::kerneld::ImplRegistrar kerneld_impl_registrar_##id##_##backend( \
      #id, __FILE__, &KerneldDefineImpl_##id##_##backend);                       \
  static void KerneldDefineImpl_##id##_##backend([[maybe_unused]] ::kerneld::OpDef& op)

}  // namespace kerneld
