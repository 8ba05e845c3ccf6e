// gemm through cuBLASLt: float32 accumulation (CUBLAS_COMPUTE_32F, which is
// plain FP32 for float32 inputs: no TF32, so float32 meets 1e-5).
//
// cuBLASLt is column-major; a row-major c[M, N] = a[M, K] @ b is the
// column-major c^T[N, M] = b^T[N, K] @ a^T[K, M], and a row-major matrix is
// its own transpose read column-major. So the call passes b as "A" and a as
// "B", with no copies: b [K, N] is a column-major N x K matrix (ld N, no
// transpose); b [N, K] (transpose_b) is a column-major K x N one that is
// transposed (ld K).
//
// Each worker thread keeps, per device, one cuBLASLt handle and a 32 MiB
// workspace (created on first use; a thread that ends passes them to the
// next, ThreadLt): per thread because the workspace may be reused only in
// stream order, and a worker thread launches on its own stream (tests and
// benchmarks on one stream at a time). Plans (descriptors
// plus the heuristic's algorithm), keyed by shape, dtype, the actual
// alignment of the pointers and the workspace size, are read-only once
// built and shared by every thread: a shape pays cuBLASLt's heuristic once
// per process, not once per worker thread (on the H100 a plan's first call
// took 260-340 us against 7-47 us warm, and the online tuner, which times
// requests, saw it). Each thread keeps the plans it used in front of the
// shared map, so a steady stream of one shape costs one cublasLtMatmul call
// and no lock.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"
#include "kerneld/thread_handoff.h"
#include "ops/gemm/cublas.h"
#include "ops/gemm/cublaslt_api.h"

namespace kerneld::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper
constexpr size_t kMaxPlans = 256;

// Only called once GemmCublas has checked that the library loaded.
const CublasLtApi& Lt() { return *LoadCublasLt(nullptr); }

Status LtStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string("gemm: ") + what + ": " + Lt().GetStatusName(st) + ": " +
                  Lt().GetStatusString(st));
}

#define KERNELD_LT(call, what) KERNELD_RETURN_IF_ERROR(LtStatus((call), what))

struct PlanKey {
  int device;
  DType dtype;
  bool transpose_b;
  int64_t m, n, k;
  int align_a, align_b, align_c;
  size_t workspace;  // the heuristic's algorithms depend on it
  bool operator<(const PlanKey& o) const {
    return std::tie(device, dtype, transpose_b, m, n, k, align_a, align_b, align_c, workspace) <
           std::tie(o.device, o.dtype, o.transpose_b, o.m, o.n, o.k, o.align_a, o.align_b,
                    o.align_c, o.workspace);
  }
};

// Shared by every thread once built (SharedPlans), and only read after: a
// per-call attribute (a bias or scale pointer, an epilogue's aux) set on
// `desc` would race; such a call needs a descriptor of its own.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lb = nullptr, la = nullptr, lc = nullptr;  // "A" = b, "B" = a
  cublasLtMatmulAlgo_t algo{};
};
void Destroy(Plan& p);
using SharedPlan = std::shared_ptr<const Plan>;

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

void Destroy(Plan& p) {  // declared above
  if (p.desc) Lt().MatmulDescDestroy(p.desc);
  if (p.lb) Lt().MatrixLayoutDestroy(p.lb);
  if (p.la) Lt().MatrixLayoutDestroy(p.la);
  if (p.lc) Lt().MatrixLayoutDestroy(p.lc);
  p = Plan{};
}

// The process's plans, built by whichever thread first needs one. Never
// destroyed (a plan a thread holds must outlive process-exit order); at
// most kMaxPlans, then it starts over (the threads' holds keep theirs).
class SharedPlans {
 public:
  static SharedPlans& Get() {
    static SharedPlans* plans = new SharedPlans;
    return *plans;
  }
  SharedPlan Find(const PlanKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second;
  }
  // Keeps `p` unless another thread's plan for `key` came first; the kept one.
  SharedPlan Add(const PlanKey& key, SharedPlan p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();  // many shapes: start over rather than grow
    return plans_.emplace(key, std::move(p)).first->second;
  }

 private:
  std::mutex mu_;
  std::map<PlanKey, SharedPlan> plans_;
};

// One thread's cuBLASLt state: per device a handle and a workspace, and
// its holds on shared plans. Never destroyed: when its thread ends it goes
// to the next thread (ThreadLt).
class LtState {
 public:
  bool Ready(int device) const {
    auto it = devices_.find(device);
    return it != devices_.end() && it->second.handle != nullptr;
  }

  Status Device(int device, DeviceState** out) {
    DeviceState& d = devices_[device];
    if (d.handle == nullptr) {
      KERNELD_LT(Lt().Create(&d.handle), "cublasLtCreate");
      // Without a workspace cuBLASLt still works, with fewer algorithms.
      if (cudaMalloc(&d.workspace, kWorkspaceBytes) == cudaSuccess) {
        d.workspace_bytes = kWorkspaceBytes;
      } else {
        cudaGetLastError();
        d.workspace = nullptr;
      }
    }
    *out = &d;
    return Status::Ok();
  }

  Status GetPlan(const PlanKey& key, const DeviceState& dev, const Plan** out) {
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      *out = it->second.get();
      return Status::Ok();
    }
    if (plans_.size() >= kMaxPlans) plans_.clear();  // many shapes: start over rather than grow
    SharedPlan p = SharedPlans::Get().Find(key);
    if (p == nullptr) {
      auto built = std::shared_ptr<Plan>(new Plan, [](Plan* q) {
        Destroy(*q);
        delete q;
      });
      KERNELD_RETURN_IF_ERROR(Build(key, dev, built.get()));
      p = SharedPlans::Get().Add(key, std::move(built));
    }
    *out = plans_.emplace(key, std::move(p)).first->second.get();
    return Status::Ok();
  }

 private:
  static Status Build(const PlanKey& key, const DeviceState& dev, Plan* p) {
    const cudaDataType_t type = key.dtype == DType::kFloat16    ? CUDA_R_16F
                                : key.dtype == DType::kBFloat16 ? CUDA_R_16BF
                                                                : CUDA_R_32F;
    KERNELD_LT(Lt().MatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, tn = CUBLAS_OP_N;
    KERNELD_LT(Lt().MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
               "TRANSA");
    KERNELD_LT(Lt().MatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tn, sizeof(tn)),
               "TRANSB");
    const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n),
               k = static_cast<uint64_t>(key.k);
    if (key.transpose_b) {
      KERNELD_LT(Lt().MatrixLayoutCreate(&p->lb, type, k, n, key.k), "layout b");
    } else {
      KERNELD_LT(Lt().MatrixLayoutCreate(&p->lb, type, n, k, key.n), "layout b");
    }
    KERNELD_LT(Lt().MatrixLayoutCreate(&p->la, type, k, m, key.k), "layout a");
    KERNELD_LT(Lt().MatrixLayoutCreate(&p->lc, type, n, m, key.n), "layout c");

    cublasLtMatmulPreference_t pref = nullptr;
    KERNELD_LT(Lt().MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    struct PrefGuard {
      cublasLtMatmulPreference_t p;
      ~PrefGuard() { Lt().MatmulPreferenceDestroy(p); }
    } guard{pref};
    const uint64_t ws = dev.workspace_bytes;
    const uint32_t al_b = static_cast<uint32_t>(key.align_b),
                   al_a = static_cast<uint32_t>(key.align_a),
                   al_c = static_cast<uint32_t>(key.align_c);
    KERNELD_LT(Lt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof(ws)),
               "workspace preference");
    // The heuristic assumes 256-byte aligned operands unless told otherwise.
    KERNELD_LT(Lt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                 &al_b, sizeof(al_b)),
               "alignment preference");
    KERNELD_LT(Lt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                 &al_a, sizeof(al_a)),
               "alignment preference");
    KERNELD_LT(Lt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                 &al_c, sizeof(al_c)),
               "alignment preference");
    KERNELD_LT(Lt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                 &al_c, sizeof(al_c)),
               "alignment preference");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    KERNELD_LT(Lt().MatmulAlgoGetHeuristic(dev.handle, p->desc, p->lb, p->la, p->lc, p->lc, pref, 1,
                                           &result, &found),
               "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      return Internal("gemm: cuBLASLt has no algorithm for " + std::string(DTypeName(key.dtype)) +
                      " " + std::to_string(key.m) + "x" + std::to_string(key.n) + "x" +
                      std::to_string(key.k));
    p->algo = result.algo;
    return Status::Ok();
  }

  std::map<int, DeviceState> devices_;
  std::map<PlanKey, SharedPlan> plans_;  // this thread's holds on shared plans
};

// A thread's LtState: taken from the states threads that ended left
// (kerneld/thread_handoff.h) and given back when it ends, with no cuBLASLt
// or CUDA call at thread exit: cublasLtDestroy synchronizes the context,
// and from a thread-local destructor, after the CUDA runtime's own state
// for that thread was gone, it crashed the daemon inside libcuda (H100,
// 2026-11-27: 8 clients of 16-step graphs on gRPC's sync threads, SIGSEGV
// in cuCtxSynchronize under __call_tls_dtors). The workspace is idle when
// the next thread takes it, and that thread skips the handle's creation
// and the workspace's cudaMalloc. One state holds every device (key 0).
ThreadHandoff<std::unique_ptr<LtState>>& LtPool() {
  static auto* pool = new ThreadHandoff<std::unique_ptr<LtState>>;
  return *pool;
}
thread_local HandedOffByDevice<std::unique_ptr<LtState>> t_lt(
    LtPool(), [](const std::unique_ptr<LtState>& s) { return s != nullptr; });

LtState& ThreadLt() {
  auto& s = t_lt.Get(0);
  if (!s) s = std::make_unique<LtState>();
  return *s;
}

}  // namespace

std::optional<std::string> CublasUnavailable(const KernelContext&) {
  std::string error;
  if (LoadCublasLt(&error) == nullptr) return error;
  return std::nullopt;
}

void WarmUpCublas(const DeviceInfo& dev) {
  std::string error;
  if (LoadCublasLt(&error) == nullptr || !dev.device.is_cuda()) return;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != dev.device.index) return;
  DeviceState* state = nullptr;
  if (!ThreadLt().Device(dev.device.index, &state).ok()) return;
  // The first matmul of a thread also pays cuBLASLt's own set-up (its
  // kernels' modules load on first use): run a small one per dtype and
  // layout, on a private stream, and drop the results. Stream-ordered
  // allocation: cudaMalloc/cudaFree would stall the device's other threads.
  const OpDef* op = OpRegistry::Global().Find("gemm");
  constexpr int64_t kM = 16, kN = 64, kK = 64;
  constexpr size_t kBytes = (kM * kK + kK * kN + kM * kN) * sizeof(float);
  void* buf = nullptr;
  cudaStream_t s = nullptr;
  if (op == nullptr || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return;
  if (cudaMallocAsync(&buf, kBytes, s) == cudaSuccess &&
      cudaMemsetAsync(buf, 0, kBytes, s) == cudaSuccess) {
    bool ok = true;
    for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (bool tb : {false, true}) {
        if (!ok) break;
        KernelContext ctx;
        ctx.op = op;
        ctx.device = dev;
        ctx.stream = s;
        ctx.attrs = {{"transpose_b", tb}, {"alpha", 1.0}};
        TensorView a, b, c;
        a.device = b.device = c.device = dev.device;
        a.dtype = b.dtype = c.dtype = dt;
        a.shape = {kM, kK};
        b.shape = tb ? Shape{kN, kK} : Shape{kK, kN};
        c.shape = {kM, kN};
        a.data = buf;
        b.data = static_cast<char*>(buf) + kM * kK * sizeof(float);
        c.data = static_cast<char*>(buf) + (kM * kK + kK * kN) * sizeof(float);
        ctx.inputs = {a, b};
        ctx.outputs = {c};
        ok = GemmCublas(ctx).ok();
      }
    }
  }
  if (buf) cudaFreeAsync(buf, s);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

bool CublasThreadReady(int device) { return ThreadLt().Ready(device); }

Status GemmCublas(KernelContext& ctx) {
  if (auto why = CublasUnavailable(ctx)) return FailedPrecondition("gemm: " + *why);
  const TensorView& a = ctx.input("a");
  const TensorView& b = ctx.input("b");
  TensorView& c = ctx.output("c");
  const int64_t m = a.dim(0), k = a.dim(1), n = c.dim(1);
  if (m == 0 || n == 0) return Status::Ok();
  cudaStream_t s = StreamOf(ctx);
  if (k == 0)  // an empty sum: c = 0 (all-zero bits in every float type)
    return CudaStatus(cudaMemsetAsync(c.raw(), 0, static_cast<size_t>(c.nbytes()), s), "gemm");
  DeviceState* dev = nullptr;
  KERNELD_RETURN_IF_ERROR(ThreadLt().Device(ctx.device.device.index, &dev));
  const PlanKey key{
      ctx.device.device.index, a.dtype,       ctx.attr_b("transpose_b"), m, n, k, a.alignment(),
      b.alignment(),           c.alignment(), dev->workspace_bytes};
  const Plan* plan = nullptr;
  KERNELD_RETURN_IF_ERROR(ThreadLt().GetPlan(key, *dev, &plan));
  const float alpha = static_cast<float>(ctx.attr_f("alpha")), beta = 0.0f;
  // beta = 0: c is not read, so a poisoned output stays out of the sum.
  return LtStatus(Lt().Matmul(dev->handle, plan->desc, &alpha, b.raw(), plan->lb, a.raw(), plan->la,
                              &beta, c.raw(), plan->lc, c.raw(), plan->lc, &plan->algo,
                              dev->workspace, dev->workspace_bytes, s),
                  "cublasLtMatmul");
}

// Ranks at kPriorityDevice; the decode kernel outranks it only where
// measured faster (ops/gemm/cuda.cu, DecodeRankFor).
KERNELD_IMPL(gemm, cublas) {
  op.Impl("cublas", GemmCublas, Requirements::Cuda(80).When("libcublasLt loads", CublasUnavailable),
          kPriorityDevice);
  op.impls.back().thread_warm_up = WarmUpCublas;
}

}  // namespace kerneld::cuda
