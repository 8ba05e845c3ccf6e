// One implementation of an op on one backend: its function, what it needs
// (kerneld/requirements.h) and how it ranks against the op's other impls.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "kerneld/context.h"
#include "kerneld/requirements.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld {

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

}  // namespace kerneld
