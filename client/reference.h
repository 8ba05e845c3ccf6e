// Float64 references for `kernelctl run --check`: each op's own, registered
// beside its schema (kerneld/reference.h).
#pragma once

#include "kerneld/reference.h"
#include "tensor_util.h"

namespace kerneld::client {

using ::kerneld::Compare;
using ::kerneld::Comparison;
using ::kerneld::Reference;
using ::kerneld::Tolerance;

}  // namespace kerneld::client
