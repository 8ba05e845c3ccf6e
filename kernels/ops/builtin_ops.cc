// Registers every op listed in ops.inc. An explicit list, not static
// initializers: a static library drops object files nothing references, and
// a silently missing op is worse than one line per op.
#include <cstdio>
#include <cstdlib>

#include "kerneld/op.h"

namespace kerneld {

#define KERNELD_BUILTIN(name) OpDef KerneldDefineOp_##name();
#include "ops/ops.inc"
#undef KERNELD_BUILTIN

void RegisterBuiltinOps(OpRegistry& registry) {
#define KERNELD_BUILTIN(name)                                                       \
  if (Status st = registry.Register(KerneldDefineOp_##name()); !st.ok()) {          \
    std::fprintf(stderr, "kerneld: registering %s: %s\n", #name, st.ToString().c_str()); \
    std::abort();                                                                   \
  }
#include "ops/ops.inc"
#undef KERNELD_BUILTIN
}

}  // namespace kerneld
