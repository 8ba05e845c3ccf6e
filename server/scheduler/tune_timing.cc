#include "scheduler/tune_timing.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "kerneld/call.h"
#include "kerneld/jit.h"
#include "kerneld/wall_timing.h"

namespace kerneld::server {

std::vector<const ImplDef*> TuneCandidates(const OpDef& op, const KernelContext& ctx,
                                           const DeviceInfo& device) {
  std::vector<std::pair<int, const ImplDef*>> ranked;
  for (const ImplDef& i : op.impls) {
    if (i.requires_.device_kind != device.device.kind || !i.requires_.AcceptsDevice(device))
      continue;
    if (i.requires_.RejectRequest(ctx, &device)) continue;
    const int rank = i.PriorityFor(ctx);
    if (rank == kPriorityJitPending && i.backend == "nvrtc") continue;  // still compiling
    ranked.emplace_back(rank, &i);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const ImplDef*> out;
  for (const auto& r : ranked) out.push_back(r.second);
  return out;
}

std::string UniformBytes(DType dt, int64_t n, uint64_t seed, double lo, double hi) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::string out;
  out.reserve(static_cast<size_t>(n) * ItemSize(dt));
  std::vector<double> v;
  for (int64_t at = 0; at < n; at += kChunk) {
    v.resize(static_cast<size_t>(std::min(kChunk, n - at)));
    for (size_t j = 0; j < v.size(); ++j) {
      // splitmix64 of (index, seed): kernel_bench's hash.
      uint64_t z = (static_cast<uint64_t>(at) + j) * 0x9e3779b97f4a7c15ull + seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      v[j] = IsFloating(dt) ? lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53
                            : static_cast<double>(z % 8);
    }
    out += Encode(dt, v);
  }
  return out;
}

namespace {

// Host memory for one problem, 64-byte aligned, freed with it.
struct HostArena {
  std::vector<std::unique_ptr<char[]>> blocks;
  void* Alloc(int64_t bytes) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 64;
    blocks.push_back(std::make_unique<char[]>(n));
    auto p = reinterpret_cast<uintptr_t>(blocks.back().get());
    return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
  }
};

}  // namespace

Status TimeOnCpu(const DeviceInfo& cpu, ThreadPool* pool, const TuneProblemSpec& p,
                 TuneTiming* out) {
  const OpDef& op = *p.op;
  HostArena arena;
  KernelContext ctx;
  ctx.device = cpu;
  ctx.pool = pool;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const TuneInput& in = p.inputs[i];
    TensorView v;
    v.device = Device::Cpu();
    v.dtype = in.dtype;
    v.shape = in.shape;
    const std::string bytes = in.values != nullptr
                                  ? Encode(in.dtype, in.values->values)
                                  : UniformBytes(in.dtype, v.numel(), p.seed + i, p.lo, p.hi);
    v.data = arena.Alloc(static_cast<int64_t>(bytes.size()));
    std::memcpy(v.data, bytes.data(), bytes.size());
    ctx.inputs.push_back(v);
  }
  KERNELD_RETURN_IF_ERROR(PrepareCall(
      op, p.attrs, "", [&](const OutputSpec&, int64_t n) { return arena.Alloc(n); }, &ctx));
  out->bucket = BucketOf(op, ctx);
  for (const ImplDef* impl : TuneCandidates(op, ctx, cpu)) {
    ImplTiming t;
    t.impl = impl;
    // One warm-up run: a CPU impl has no lazily loaded state beyond caches.
    if (Status st = WallMedianNs(
            1, p.repeats, [&] { return Call(*impl, ctx); }, &t.median_ns);
        !st.ok())
      t.median_ns = 0, t.error = st.message();
    out->impls.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace kerneld::server
