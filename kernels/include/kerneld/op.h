// Everything an op's files use, in one include: the schema
// (kerneld/schema.h, with attr.h, shape_pattern.h, output_rule.h and
// bench_spec.h), its implementations and their requirements (impl.h,
// requirements.h), the kernel context (context.h), and the registry with
// its registration macros (registry.h). A file that needs one of them
// alone may include that header instead.
#pragma once

#include "kerneld/attr.h"
#include "kerneld/bench_spec.h"
#include "kerneld/context.h"
#include "kerneld/impl.h"
#include "kerneld/output_rule.h"
#include "kerneld/registry.h"
#include "kerneld/requirements.h"
#include "kerneld/schema.h"
#include "kerneld/shape_pattern.h"
