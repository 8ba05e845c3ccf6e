// softmax, JIT form (the nvrtc backend, docs/jit.md): the kernel of
// cuda.cuh that the AOT launcher (softmax::detail::Launch) picks for the
// request, by its own chooser (ChoosePlan, plan.h) and the same rules for
// the pack width, the register cache and the split-row cluster, named for
// NVRTC with its template arguments, the vocabulary (and a split row's
// chunk) compiled in; the scale (1 / temperature) stays a kernel argument. The output is float32
// whatever the logits' dtype.
#include <climits>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/jit_plan.cuh"
#include "ops/softmax/cuda.cuh"

namespace kerneld::cuda {

namespace {

constexpr const char* kNs = "kerneld::cuda::softmax::";
constexpr int kPack = 4;  // Softmax's kN: four elements a pack for every dtype

// The split-row launch of LaunchCluster: false when no cluster size caches
// the row (the per-row kernels take it, as in the AOT launcher).
bool PlanCluster(const std::string& T, int n, int64_t rows, int64_t vocab, softmax::Plan plan,
                 JitLaunch* out) {
  const int max_items = softmax::kMaxCached / n;
  const int64_t units = vocab / n;
  const int max_threads = std::clamp(plan.max_threads, 32, softmax::kMaxThreads);
  int c = std::max(plan.cluster, softmax::Pow2Ceil((units + int64_t{max_threads} * max_items - 1) /
                                                   (int64_t{max_threads} * max_items)));
  if (c < 2) c = 2;
  if (c > softmax::kMaxCluster || rows * c > INT_MAX) return false;
  const int64_t chunk = (units + c - 1) / c;
  for (int items = 1; items <= max_items; items *= 2) {
    if ((chunk + items - 1) / items > max_threads) continue;
    const unsigned threads = softmax::detail::ThreadsFor<1>((chunk + items - 1) / items);
    out->kernel = JitName(std::string(kNs) + "SoftmaxClusterKernel",
                          {T, "float", JitInt(n), JitInt(items), JitInt(vocab), JitInt(chunk)});
    out->grid.x = static_cast<unsigned>(rows * c);
    out->block.x = threads;
    out->cluster.x = static_cast<unsigned>(c);
    out->args.Add(vocab).Add(chunk);
    return true;
  }
  return false;
}

// LaunchPerRow: the fewest items a thread that keep a block at <= 512
// threads, else the streaming kernel.
void PlanPerRow(const std::string& T, int n, int64_t rows, int64_t vocab, JitLaunch* out) {
  const int max_items = softmax::kMaxCached / n;
  const int64_t units = vocab / n;
  out->grid.x = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, int64_t{1} << 30));
  for (int items = 1; items <= max_items; items *= 2) {
    if ((units + items - 1) / items > softmax::kMaxThreads) continue;
    const int64_t t = (units + items - 1) / items;
    out->kernel = JitName(std::string(kNs) + "SoftmaxRegKernel",
                          {T, "float", JitInt(n), JitInt(items), JitInt(vocab)});
    out->block.x = static_cast<unsigned>(std::max<int64_t>(32, (t + 31) / 32 * 32));
    out->args.Add(rows).Add(vocab);
    return;
  }
  out->kernel =
      JitName(std::string(kNs) + "SoftmaxStreamKernel", {T, "float", JitInt(n), JitInt(vocab)});
  out->block.x = 1024;
  out->args.Add(rows).Add(vocab);
}

Status PlanSoftmax(const KernelContext& ctx, const JitTarget& target, JitLaunch* out) {
  const TensorView& x = ctx.input("logits");
  const TensorView& y = JitOutput(ctx, "probs");
  if (x.numel() == 0) {
    out->empty = true;
    return Status::Ok();
  }
  JitType t;
  if (!JitTypeOf(x.dtype, &t)) return FailedPrecondition("softmax: no JIT form for this dtype");
  const int64_t rows = x.dim(0), vocab = x.dim(1);
  const bool packs = vocab % kPack == 0 &&
                     JitAlignedTo(x, kPack * static_cast<int64_t>(ItemSize(x.dtype))) &&
                     JitAlignedTo(y, kPack * 4);
  const int n = packs ? kPack : 1;
  out->header = "ops/softmax/cuda.cuh";
  softmax::DeviceCaps dev;
  dev.compute_capability = target.compute_capability;
  dev.sm_count = std::max(target.sm_count, 1);
  softmax::Plan plan = softmax::ChoosePlan(rows, vocab, dev);
  if (const int fc = softmax::g_force_cluster.load(std::memory_order_relaxed); fc >= 0)
    plan.cluster = fc;
  if (const int ft = softmax::g_force_threads.load(std::memory_order_relaxed); ft > 0)
    plan.max_threads = ft;
  out->args.Add(x.raw()).Add(y.raw());
  const bool clustered = plan.cluster >= 2 && target.compute_capability >= 90 &&
                         PlanCluster(t.name, n, rows, vocab, plan, out);
  if (!clustered) PlanPerRow(t.name, n, rows, vocab, out);
  out->args.Add(static_cast<float>(1.0 / ctx.attr_f("temperature")));
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(softmax, nvrtc) { RegisterJitImpl(op, "ops/softmax/cuda.cuh", PlanSoftmax); }

}  // namespace kerneld::cuda
