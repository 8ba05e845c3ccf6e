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
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kerneld/schema.h"
#include "kerneld/status.h"

namespace kerneld {

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
