// A RegisterKernel request's spec, checked: names, dtypes, shape rules,
// attrs, the launch rule, compile options and the source's size, each
// bounded. Every message names the field and what was expected; nothing a
// client sends aborts or allocates without a bound (the fuzz harness,
// tests/fuzz/kernel_spec_fuzz.cc, drives ParseKernelSpec directly).
//
// The kernel's parameters, in order (docs/user-kernels.md): each input as
// `const T*` (or `T*`), each output as `T*`, each shape symbol in order of
// first appearance in the inputs' shapes as int64_t, each attr (float:
// float, int: int64_t, bool: bool).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/v1/kerneld.pb.h"
#include "sandbox/launch_rule.h"

namespace kerneld::server::sandbox {

inline constexpr size_t kMaxSourceBytes = 256 * 1024;
inline constexpr size_t kMaxNameBytes = 64;
inline constexpr size_t kMaxPatternBytes = 256;
inline constexpr size_t kMaxDocBytes = 4096;
inline constexpr int kMaxTensors = 16;  // inputs, and outputs, each
inline constexpr int kMaxAttrs = 16;
inline constexpr int kMaxDims = 8;
inline constexpr int kMaxSymbols = 16;
inline constexpr int kMaxCompileOptions = 16;

struct UserOutput {
  std::string name, doc, in_place_of, may_alias;
  std::string same_as;            // "same as 'x'": that input's dtype and shape
  ShapePattern shape;             // otherwise
  DType dtype = DType::kInvalid;  // kInvalid: the first input's
};

struct UserKernelSpec {
  std::string name, entry, doc;
  // "scale<T>": a template instantiated per dtype of the first input;
  // entry_base is "scale". Otherwise every tensor has one dtype.
  bool templated = false;
  std::string entry_base;
  std::vector<InputDef> inputs;
  std::vector<UserOutput> outputs;
  std::vector<AttrDef> attrs;
  std::vector<std::string> symbols;  // kernel arguments after the tensors
  LaunchRule launch;
  std::vector<std::string> compile_options;
  std::string arch;  // "" : the daemon's choice
};

// Checks the request and fills *out (source not included). INVALID_ARGUMENT
// with the field and the reason otherwise.
Status ParseKernelSpec(const v1::RegisterKernelRequest& req, UserKernelSpec* out);

// A shape rule as a client writes it ("[n]", "[rows, 2*d]", "[..., h]"),
// bounded and checked; never aborts (ShapePattern::Parse does, on a
// programming error).
Status ParseShapePattern(const std::string& what, const std::string& text, ShapePattern* out);

// The op's schema (no impls yet): inputs, outputs, attrs, same-dtype pairs.
OpDef BuildOpDef(const UserKernelSpec& spec);

// The instantiations compiled: "scale" or "scale<float>", "scale<__half>"...
// with the dtype each is for (kInvalid for a non-template entry).
std::vector<std::pair<DType, std::string>> EntryInstantiations(const UserKernelSpec& spec);

// NVRTC's C++ name of a dtype's element ("float", "__half"); "" when none.
const char* CudaTypeName(DType dt);

// The C++ declaration the entry must have for `dt` ("void(const float* x,
// float* y, int64_t n, float factor)"), and compile-time checks of it
// appended to the program so a wrong signature is a compile error that says so.
std::string EntrySignature(const UserKernelSpec& spec, DType dt);
std::string SignatureChecks(const UserKernelSpec& spec);

}  // namespace kerneld::server::sandbox
