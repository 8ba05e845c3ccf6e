#include "jit/jit_stats.h"

namespace kerneld::server::jit {

JitStats& Stats() {
  static JitStats* s = new JitStats();  // never destroyed: read by late metric scrapes
  return *s;
}

}  // namespace kerneld::server::jit
