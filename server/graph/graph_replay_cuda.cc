// CUDA graph replay (graph_replay.h). Linked only into CUDA builds.
#include <cuda_runtime.h>

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "graph/graph_memory.h"
#include "graph/graph_replay.h"
#include "graph/graph_replay_key.h"
#include "kerneld/thread_handoff.h"

namespace kerneld::server {

namespace {

std::string ErrText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

int64_t AlignUp(int64_t n) {
  return (n + kGraphArenaAlign - 1) / kGraphArenaAlign * kGraphArenaAlign;
}

// One executable graph and the stable memory it was captured over.
struct Entry {
  std::string key;
  std::vector<AttrMap> attrs;  // per step, as captured
  cudaGraphExec_t exec = nullptr;
  char* memory = nullptr;  // arena, then the staging slots
  int64_t arena_offset = 0;
  std::vector<int64_t> in_off, out_off;  // -1: not staged (a buffer's own memory)

  Entry() = default;
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  // Evicted while a replay may still run on `stream`: the executable graph
  // is freed when it completes, the memory after it on the stream.
  void Release(cudaStream_t stream) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (memory != nullptr) cudaFreeAsync(memory, stream);
    exec = nullptr;
    memory = nullptr;
    ReplayStats().entries.fetch_sub(1, std::memory_order_relaxed);
  }
  ~Entry() {
    // At thread exit (the stream may be gone): synchronous frees.
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (memory != nullptr) cudaFree(memory);
    if (exec != nullptr || memory != nullptr)
      ReplayStats().entries.fetch_sub(1, std::memory_order_relaxed);
  }
};

// One worker thread's cache for one device: LRU, front most recent.
struct Cache {
  std::list<Entry> lru;
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  // Failed captures by structure key: given up after two (the first call
  // of an impl may load a module or allocate its workspace, which a
  // capture refuses; the direct run that follows does it for good).
  std::unordered_map<std::string, int> failures;
};

constexpr int kCaptureTries = 2;

// The caches of threads that ended, whose entries would otherwise free
// graphs and memory from a thread-exit destructor (kerneld/thread_handoff.h).
ThreadHandoff<std::unique_ptr<Cache>>& CachePool() {
  static auto* pool = new ThreadHandoff<std::unique_ptr<Cache>>;
  return *pool;
}
thread_local HandedOffByDevice<std::unique_ptr<Cache>> t_caches(
    CachePool(), [](const std::unique_ptr<Cache>& c) { return c != nullptr; });

Cache& CacheOf(int device) {
  auto& c = t_caches.Get(device);
  if (!c) c = std::make_unique<Cache>();
  return *c;
}

// Captures `plan`'s launches over the entry's memory into *graph.
Status Capture(const GraphPlan& plan, const std::vector<const ImplDef*>& impls, const Entry& e,
               const KernelContext& ctx, cudaGraph_t* graph) {
  auto s = static_cast<cudaStream_t>(ctx.stream);
  std::vector<TensorView> in = ctx.inputs, out = ctx.outputs;
  for (size_t i = 0; i < in.size(); ++i)
    if (e.in_off[i] >= 0) in[i].data = e.memory + e.in_off[i], in[i].byte_offset = 0;
  for (size_t j = 0; j < out.size(); ++j)
    if (e.out_off[j] >= 0) out[j].data = e.memory + e.out_off[j], out[j].byte_offset = 0;
  // Thread-local mode: an impl that synchronizes or allocates fails its
  // call instead of another thread's work being caught in this capture.
  if (cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      err != cudaSuccess) {
    cudaGetLastError();
    return Internal("cudaStreamBeginCapture: " + ErrText(err));
  }
  Status st = RunGraphSteps(plan, impls, *CudaGraphOps(), ctx, in, out,
                            plan.arena_bytes > 0 ? e.memory + e.arena_offset : nullptr);
  cudaGraph_t g = nullptr;
  const cudaError_t err = cudaStreamEndCapture(s, &g);
  if (st.ok() && err != cudaSuccess) st = Internal("cudaStreamEndCapture: " + ErrText(err));
  if (!st.ok()) {
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();
    return st;
  }
  *graph = g;
  return Status::Ok();
}

}  // namespace

Status RunGraphReplayed(const GraphPlan& plan, const std::vector<const ImplDef*>& impls,
                        const GraphReplayOptions& replay, KernelContext& ctx, bool* ran) {
  *ran = false;
  if (replay.cache_entries <= 0 || ctx.stream == nullptr || plan.steps.empty() ||
      replay.inputs.size() != ctx.inputs.size() || replay.outputs.size() != ctx.outputs.size() ||
      impls.size() != plan.steps.size())
    return Status::Ok();
  auto s = static_cast<cudaStream_t>(ctx.stream);
  Cache& cache = CacheOf(ctx.device.device.index);

  const std::string structure = GraphStructureKey(plan, impls);
  if (auto f = cache.failures.find(structure);
      f != cache.failures.end() && f->second >= kCaptureTries)
    return Status::Ok();
  const std::string key = GraphReplayKey(structure, replay, ctx.inputs, ctx.outputs);

  std::vector<AttrMap> attrs;
  attrs.reserve(plan.steps.size());
  for (const GraphStepPlan& st : plan.steps) attrs.push_back(st.attrs);

  Entry* e = nullptr;
  if (auto it = cache.index.find(key); it != cache.index.end()) {
    cache.lru.splice(cache.lru.begin(), cache.lru, it->second);
    e = &*it->second;
    if (e->attrs != attrs) {
      // New attr values over the same structure and memory: a fresh
      // capture updates the executable graph's nodes in place.
      cudaGraph_t g = nullptr;
      if (Status st = Capture(plan, impls, *e, ctx, &g); !st.ok()) return Status::Ok();
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(e->exec, g, &info) != cudaSuccess) {
        cudaGetLastError();
        cudaGraphExec_t fresh = nullptr;
        const cudaError_t err = cudaGraphInstantiate(&fresh, g, 0);
        if (err != cudaSuccess) {
          cudaGetLastError();
          cudaGraphDestroy(g);
          return Status::Ok();  // the old exec stays for the old attrs
        }
        cudaGraphExecDestroy(e->exec);
        e->exec = fresh;
        ReplayStats().captures.fetch_add(1, std::memory_order_relaxed);
      } else {
        ReplayStats().updates.fetch_add(1, std::memory_order_relaxed);
      }
      cudaGraphDestroy(g);
      e->attrs = std::move(attrs);
    } else {
      ReplayStats().hits.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    // A miss: the entry's memory, then the capture over it.
    auto made = std::make_unique<Entry>();
    made->key = key;
    made->in_off.assign(ctx.inputs.size(), -1);
    made->out_off.assign(ctx.outputs.size(), -1);
    int64_t total = AlignUp(plan.arena_bytes);
    for (size_t i = 0; i < ctx.inputs.size(); ++i)
      if (replay.inputs[i].empty())
        made->in_off[i] = total, total += AlignUp(ctx.inputs[i].nbytes());
    for (size_t j = 0; j < ctx.outputs.size(); ++j)
      if (replay.outputs[j].empty())
        made->out_off[j] = total, total += AlignUp(ctx.outputs[j].nbytes());
    if (total > kMaxReplayEntryBytes) return Status::Ok();
    if (total > 0 && cudaMallocAsync(reinterpret_cast<void**>(&made->memory),
                                     static_cast<size_t>(total), s) != cudaSuccess) {
      cudaGetLastError();
      made->memory = nullptr;
      return Status::Ok();  // no memory to keep: run directly
    }
    ReplayStats().entries.fetch_add(1, std::memory_order_relaxed);
    cudaGraph_t g = nullptr;
    if (Status st = Capture(plan, impls, *made, ctx, &g); !st.ok()) {
      // Not capturable (now): run directly; after kCaptureTries failures
      // never tried again for this structure on this thread (bounded:
      // forgotten wholesale past 1024 structures).
      if (cache.failures.size() >= 1024) cache.failures.clear();
      ++cache.failures[structure];
      ReplayStats().uncapturable.fetch_add(1, std::memory_order_relaxed);
      made->Release(s);
      return Status::Ok();
    }
    const cudaError_t err = cudaGraphInstantiate(&made->exec, g, 0);
    cudaGraphDestroy(g);
    if (err != cudaSuccess) {
      cudaGetLastError();
      made->exec = nullptr;
      made->Release(s);
      return Status::Ok();
    }
    ReplayStats().captures.fetch_add(1, std::memory_order_relaxed);
    made->attrs = std::move(attrs);
    cache.lru.emplace_front();
    Entry& slot = cache.lru.front();
    slot.key = std::move(made->key);
    slot.attrs = std::move(made->attrs);
    slot.exec = std::exchange(made->exec, nullptr);
    slot.memory = std::exchange(made->memory, nullptr);
    slot.arena_offset = made->arena_offset;
    slot.in_off = std::move(made->in_off);
    slot.out_off = std::move(made->out_off);
    cache.index[slot.key] = cache.lru.begin();
    e = &slot;
    while (cache.lru.size() > static_cast<size_t>(replay.cache_entries)) {
      Entry& old = cache.lru.back();
      cache.index.erase(old.key);
      old.Release(s);
      cache.lru.pop_back();
    }
  }

  // The launch: staged inputs into their slots, the graph, staged outputs
  // back to the worker's views, all in order on this thread's stream.
  *ran = true;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (e->in_off[i] < 0 || ctx.inputs[i].nbytes() == 0) continue;
    if (cudaError_t err = cudaMemcpyAsync(e->memory + e->in_off[i], ctx.inputs[i].raw(),
                                          static_cast<size_t>(ctx.inputs[i].nbytes()),
                                          cudaMemcpyDeviceToDevice, s);
        err != cudaSuccess)
      return Internal("graph: staging an input for replay: " + ErrText(err));
  }
  if (cudaError_t err = cudaGraphLaunch(e->exec, s); err != cudaSuccess)
    return Internal("graph: cudaGraphLaunch: " + ErrText(err));
  for (size_t j = 0; j < ctx.outputs.size(); ++j) {
    if (e->out_off[j] < 0 || ctx.outputs[j].nbytes() == 0) continue;
    if (cudaError_t err = cudaMemcpyAsync(
            const_cast<void*>(ctx.outputs[j].raw()), e->memory + e->out_off[j],
            static_cast<size_t>(ctx.outputs[j].nbytes()), cudaMemcpyDeviceToDevice, s);
        err != cudaSuccess)
      return Internal("graph: copying a replayed output: " + ErrText(err));
  }
  return Status::Ok();
}

}  // namespace kerneld::server
