// CPU backend kernels vs this machine's memcpy bandwidth, same run.
//
//   build/bench/cpu_kernel_bench [MiB]   (default 64)
//
// Bandwidth counts bytes that must move: input read once + output written
// once (memcpy: the same 2 x size). Prints the median of 15 runs after a
// warm-up, and the ratio of each op to memcpy.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "bench_util.h"
#include "kerneld/call.h"
#include "kerneld/check.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

using namespace kerneld;

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const size_t bytes = mib << 20;
  auto src = std::unique_ptr<char[]>(new (std::align_val_t{64}) char[bytes]);
  auto dst = std::unique_ptr<char[]>(new (std::align_val_t{64}) char[bytes]);
  std::mt19937 rng(1);
  for (size_t i = 0; i < bytes / 4; ++i) reinterpret_cast<float*>(src.get())[i] = static_cast<float>(rng() % 1000) / 7.f;
  std::memset(dst.get(), 1, bytes);  // fault the pages in before timing

  const int reps = 15;
  auto memcpy_once = [&] { std::memcpy(dst.get(), src.get(), bytes); };
  memcpy_once();
  const double t_copy = bench::MedianSeconds(reps, memcpy_once);
  const double bw_copy = 2.0 * static_cast<double>(bytes) / t_copy / 1e9;
  std::printf("%zu MiB per tensor\n%-28s %10s %10s %8s\n", mib, "kernel", "ms", "GB/s", "vs copy");
  std::printf("%-28s %10.3f %10.2f %8.2f\n", "memcpy (1 thread)", t_copy * 1e3, bw_copy, 1.0);

  const OpDef* scale = OpRegistry::Global().Find("scale");
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const int64_t n = static_cast<int64_t>(bytes / ItemSize(dt));
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &ThreadPool::Default()}) {
      // The library's one call path (kerneld/call.h), as the server runs it.
      TensorView x;
      x.data = src.get();
      x.dtype = dt;
      x.shape = {n};
      TensorView y = x;
      y.data = dst.get();
      KernelContext ctx;
      ctx.inputs = {x};
      std::vector<OutputSpec> specs;
      if (!Prepare(*scale, {{"factor", 1.0001}}, &ctx, &specs).ok()) std::abort();
      ctx.outputs = {y};
      ctx.pool = pool;
      const ImplDef& impl = *scale->FindImpl("cpu");
      auto run = [&] {
        if (!Call(impl, ctx).ok()) std::abort();
      };
      run();
      const double t = bench::MedianSeconds(reps, run);
      const double bw = 2.0 * static_cast<double>(bytes) / t / 1e9;
      char name[64];
      std::snprintf(name, sizeof name, "scale %s (%d thr)", std::string(DTypeName(dt)).c_str(),
                    pool ? pool->size() : 1);
      std::printf("%-28s %10.3f %10.2f %8.2f\n", name, t * 1e3, bw, bw / bw_copy);
    }
  }
  return 0;
}
