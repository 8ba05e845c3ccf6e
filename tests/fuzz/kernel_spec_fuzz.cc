// RegisterKernel's spec parser (server/sandbox/kernel_spec.h) on arbitrary
// input: a RegisterKernelRequest's bytes, or (first byte 'L' / 'S' / 'I')
// a launch rule, a shape rule or a source's #include lines as text. A spec
// is refused with a message or accepted within its bounds; an accepted
// one builds its op, its signature checks, and evaluates its launch rule
// on values from the input; nothing crashes, leaks or runs unbounded.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kerneld/check.h"
#include "sandbox/kernel_spec.h"
#include "sandbox/user_compiler.h"

using namespace kerneld;
using namespace kerneld::server::sandbox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  if (!in.empty() && (in[0] == 'L' || in[0] == 'S' || in[0] == 'I')) {
    const std::string text = in.substr(1);
    if (in[0] == 'L') {
      LaunchRule rule;
      if (LaunchRule::Parse(text, {"n", "rows", "d"}, &rule).ok()) {
        LaunchDims dims;
        int64_t k = static_cast<int64_t>(size) * 977;
        (void)rule.Eval([&](const std::string&, int64_t* v) { return *v = k++, true; }, &dims);
      }
    } else if (in[0] == 'S') {
      ShapePattern p;
      (void)ParseShapePattern("x", text, &p);
    } else {
      (void)CheckIncludes(text);
    }
    return 0;
  }
  v1::RegisterKernelRequest req;
  if (!req.ParseFromString(in)) return 0;
  UserKernelSpec spec;
  Status st = ParseKernelSpec(req, &spec);
  if (!st.ok()) {
    if (st.message().empty()) __builtin_trap();  // every refusal says why
    return 0;
  }
  OpDef op = BuildOpDef(spec);
  if (op.inputs.empty() || op.outputs.empty()) __builtin_trap();
  (void)SignatureChecks(spec);
  for (const auto& [dt, expr] : EntryInstantiations(spec)) (void)EntrySignature(spec, dt);
  // The launch rule on each symbol bound to a value from the input.
  LaunchDims dims;
  int64_t k = 1;
  (void)spec.launch.Eval(
      [&](const std::string& s, int64_t* v) {
        *v = static_cast<int64_t>(s.size()) * 131 + (k *= 7) % 100000;
        return true;
      },
      &dims);
  return 0;
}
