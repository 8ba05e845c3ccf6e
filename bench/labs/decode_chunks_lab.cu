// Question: how many chunks should the tensor-core decode (decode_mma.cuh)
// split each request's keys into? Small batches need the split to fill the
// GPU, but every chunk adds a partial to merge (a second kernel) and a
// pipeline to fill. Times DecodeMma (bfloat16, H_q / H_kv = 32 / 8, head_dim
// 128, page 16: kernel_bench's decode points) at each chunk count beside the
// plan's choice (DecodeMmaChunks) and a read of the cache's bytes, with
// kernel_bench's method (L2 read-flushed, median). Each count's o is first
// compared with one chunk's (the merge must not change the answer). The
// last column: the plan's count with the merge launched after the chunks'
// kernel ends (no programmatic dependent launch).
//
//   decode_chunks_lab [REPS]      one table on stdout
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "bench_cuda.cuh"
#include "common/attention/decode_mma.cuh"

namespace kb = kerneld::bench;
namespace at = kerneld::cuda::attention;

namespace {

constexpr int kHq = 32, kHkv = 8, kD = 128, kPage = 16;
bool g_pdl = false;  // the merge as a programmatic dependent (sm_90+, as the binding does)
using T = __nv_bfloat16;

struct Problem {
  int batch = 0;
  int64_t kv = 0;
  T *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float *lse = nullptr, *part = nullptr;
  int32_t *indptr = nullptr, *indices = nullptr, *last = nullptr;
  int* bad = nullptr;
  int64_t pages = 0;
};

Problem Make(int batch, int64_t kv) {
  Problem p;
  p.batch = batch;
  p.kv = kv;
  const int64_t per = (kv + kPage - 1) / kPage;
  p.pages = per * batch;
  const size_t cache = static_cast<size_t>(p.pages) * kPage * kHkv * kD;
  CK(cudaMalloc(&p.q, size_t{1} * batch * kHq * kD * sizeof(T)));
  CK(cudaMalloc(&p.o, size_t{1} * batch * kHq * kD * sizeof(T)));
  CK(cudaMalloc(&p.lse, size_t{1} * batch * kHq * sizeof(float)));
  CK(cudaMalloc(&p.k, cache * sizeof(T)));
  CK(cudaMalloc(&p.v, cache * sizeof(T)));
  CK(cudaMalloc(&p.part, size_t{64} * batch * kHq * (kD + 1) * sizeof(float)));
  CK(cudaMalloc(&p.bad, sizeof(int)));
  CK(cudaMemset(p.bad, 0, sizeof(int)));
  kb::FillUniform<<<256, 256>>>(p.q, int64_t{batch} * kHq * kD, 1, -1.f, 1.f);
  kb::FillUniform<<<1024, 256>>>(p.k, static_cast<int64_t>(cache), 2, -1.f, 1.f);
  kb::FillUniform<<<1024, 256>>>(p.v, static_cast<int64_t>(cache), 3, -1.f, 1.f);
  CK(cudaGetLastError());
  // Every request kv keys, its pages a shuffled share of the cache.
  std::vector<int32_t> indptr(batch + 1), indices(static_cast<size_t>(p.pages)), last(batch);
  std::iota(indices.begin(), indices.end(), 0);
  std::shuffle(indices.begin(), indices.end(), std::mt19937(7));
  for (int b = 0; b <= batch; ++b) indptr[b] = static_cast<int32_t>(b * per);
  for (int b = 0; b < batch; ++b) last[b] = static_cast<int32_t>(kv - (per - 1) * kPage);
  CK(cudaMalloc(&p.indptr, indptr.size() * 4));
  CK(cudaMalloc(&p.indices, indices.size() * 4));
  CK(cudaMalloc(&p.last, last.size() * 4));
  CK(cudaMemcpy(p.indptr, indptr.data(), indptr.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.indices, indices.data(), indices.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.last, last.data(), last.size() * 4, cudaMemcpyHostToDevice));
  return p;
}

void Free(Problem& p) {
  for (void* x : {static_cast<void*>(p.q), static_cast<void*>(p.k), static_cast<void*>(p.v),
                  static_cast<void*>(p.o), static_cast<void*>(p.lse), static_cast<void*>(p.part),
                  static_cast<void*>(p.indptr), static_cast<void*>(p.indices),
                  static_cast<void*>(p.last), static_cast<void*>(p.bad)})
    cudaFree(x);
}

at::AttendParams Params(const Problem& p, int chunks) {
  at::AttendParams a;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.o = p.o;
  a.lse = p.lse;
  a.bad = p.bad;
  a.kv = {p.indptr, p.indices, p.last, p.pages, p.pages, kPage};
  a.batch = p.batch;
  a.rows = p.batch;
  a.hq = kHq;
  a.hkv = kHkv;
  a.group = kHq / kHkv;
  a.chunks = chunks;
  a.scale = 1.f / std::sqrt(static_cast<float>(kD));
  if (chunks > 1) {
    a.part_o = p.part;
    a.part_lse = p.part + int64_t{chunks} * p.batch * kHq * kD;
  }
  return a;
}

std::vector<float> Output(const Problem& p) {
  std::vector<T> h(static_cast<size_t>(p.batch) * kHq * kD);
  CK(cudaMemcpy(h.data(), p.o, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __bfloat162float(h[i]);
  return f;
}

// DecodeMma<T, kD> of p's params at `chunks` (a function: CK takes one argument).
cudaError_t Run(const Problem& p, int chunks, cudaStream_t s, bool pdl = g_pdl) {
  return at::DecodeMma<T, kD>(Params(p, chunks), s, pdl);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_pdl = prop.major >= 9;
  kb::L2Flush flush;
  flush.bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  flush.sms = sms;
  CK(cudaMalloc(const_cast<void**>(&flush.buf), flush.bytes));
  CK(cudaMalloc(&flush.sink, sizeof(unsigned)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("%s, %d SMs; us (median of %d, L2 read-flushed); * the plan's choice\n", prop.name,
              sms, reps);
  const int counts[] = {1, 2, 4, 8, 12, 16, 24, 33, 48, 64};
  std::printf("%-12s %8s", "point", "read");
  for (int c : counts) std::printf(" %7d", c);
  std::printf("  best/plan  plan w/o PDL\n");
  for (int batch : {1, 4, 16, 64})
    for (int64_t kv : {512, 2048, 8192, 32768}) {
      Problem p = Make(batch, kv);
      const int plan = at::DecodeMmaChunks(batch, kHq / at::DecodePack(kHq / kHkv), kv, sms);
      const size_t bytes = static_cast<size_t>(batch) * kv * kHkv * kD * sizeof(T) * 2;
      const double read = kb::FlushedMedianUs(s, reps, flush, [&] {
        kb::ReadBytes(s, p.k, bytes / 2, sms, flush.sink);
        kb::ReadBytes(s, p.v, bytes / 2, sms, flush.sink);
      });
      CK(Run(p, 1, s));
      CK(cudaStreamSynchronize(s));
      const std::vector<float> one = Output(p);
      char name[32];
      std::snprintf(name, sizeof name, "b%dkv%lld", batch, static_cast<long long>(kv));
      std::printf("%-12s %8.1f", name, read);
      double best = 1e30, at_plan = 0;
      for (int c : counts) {
        if (c > (kv + at::kDecodeKeys - 1) / at::kDecodeKeys) {
          std::printf(" %7s", "-");
          continue;
        }
        CK(Run(p, c, s));
        CK(cudaStreamSynchronize(s));
        const std::vector<float> got = Output(p);
        float worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - one[i]));
        if (worst > 2e-2f) {
          std::printf("\n%s chunks %d: o differs from one chunk's by %g\n", name, c, worst);
          return 1;
        }
        const double us = kb::FlushedMedianUs(s, reps, flush, [&] { CK(Run(p, c, s)); });
        best = std::min(best, us);
        if (c == plan) at_plan = us;
        std::printf(" %6.1f%s", us, c == plan ? "*" : " ");
      }
      if (at_plan == 0) {  // the plan's count is not a column: time it too
        at_plan = kb::FlushedMedianUs(s, reps, flush, [&] { CK(Run(p, plan, s)); });
        std::printf("  (plan %d: %.1f)", plan, at_plan);
      }
      const double no_pdl =
          kb::FlushedMedianUs(s, reps, flush, [&] { CK(Run(p, plan, s, false)); });
      std::printf("  %.2f  %.1f\n", best / at_plan, no_pdl);
      Free(p);
    }
  return 0;
}
