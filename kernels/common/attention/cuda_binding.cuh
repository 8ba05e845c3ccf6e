// What the CUDA bindings of the attention ops share: one stream-ordered
// scratch block (the check's flag, then the split-KV workspace), the index
// check launched before the op's kernels, and the flag read back after
// them. A set flag means the kernels returned without touching memory;
// the message then comes from indices.h on a host copy of the arrays (the
// CPU impl's words exactly). The check kernel sets the host's copy of the
// flag too (mapped pinned memory): reading it takes no copy, only the wait
// for the stream, the price of an INVALID_ARGUMENT that names the entry. A caller that waits
// for the stream anyway (the daemon's worker, the bench) sets
// KernelContext::defer_checks and the read happens after its wait instead
// (ctx.deferred), so the binding itself never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/attention/check.cuh"
#include "common/attention/indices.h"
#include "common/attention/schema.h"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/pinned_flags.cuh"
#include "common/cuda/workspace_pool.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda::attention {

// A view's int32 values, copied to the host (the error path only).
inline std::vector<int32_t> HostInts(const TensorView& v) {
  std::vector<int32_t> out(static_cast<size_t>(v.numel()));
  if (!out.empty())
    cudaMemcpy(out.data(), v.raw(), out.size() * sizeof(int32_t), cudaMemcpyDefault);
  return out;
}

// The flag as the host reads it: a mapped pinned int (pinned_flags.cuh)
// the check kernel sets with the device's, zeroed here; given back once
// the stream has been waited for (no kernel can still write it).
struct HostFlag {
  explicit HostFlag(cudaStream_t stream) : s(stream) {
    if (p != nullptr) *p = 0;
  }
  ~HostFlag() {
    if (p != nullptr && !waited) cudaStreamSynchronize(s);  // a check never run
    PinnedFlags::Give(p);
  }
  HostFlag(const HostFlag&) = delete;
  HostFlag& operator=(const HostFlag&) = delete;
  cudaStream_t s;
  int* p = PinnedFlags::Take();
  bool waited = false;
};

class Scratch {
 public:
  Scratch(const char* op, KernelContext& ctx)
      : op_(op), ctx_(ctx), s_(StreamOf(ctx)), flag_(std::make_shared<HostFlag>(s_)) {}
  ~Scratch() {
    if (base_) cudaFreeAsync(base_, s_);  // stream-ordered: after the kernels
  }
  // The device flag and `bytes` of workspace after it, from the retained
  // pool (workspace_pool.cuh). CheckIndices zeroes the flag.
  Status Allocate(size_t bytes) {
    return AllocateWorkspace(ctx_.device.device.index, 256 + bytes, s_, op_, &base_);
  }
  // The device flag zeroed, for a kernel that sets it with no check kernel
  // before it (CheckIndices zeroes it otherwise).
  Status ZeroErr() { return CudaStatus(cudaMemsetAsync(base_, 0, sizeof(int), s_), op_); }
  int* err() const { return static_cast<int*>(base_); }
  int* host_err() const { return flag_->p; }  // CheckParams::host_err
  float* workspace() const { return reinterpret_cast<float*>(static_cast<char*>(base_) + 256); }

  // After the kernels: the flag read, at once or, when the caller set
  // ctx.defer_checks, in ctx.deferred after the caller's own wait. When
  // set, host_check's message (or a plain one, if the arrays changed since
  // the kernels read them). host_check may run after the binding returned:
  // it captures what it needs by value (ctx's views stay valid while the
  // caller holds ctx).
  Status Finish(std::function<Status()> host_check) {
    if (flag_->p == nullptr) {  // no mapped pinned memory: copy the flag, wait
      int value = 0;
      KERNELD_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(&value, base_, sizeof(int), cudaMemcpyDeviceToHost, s_), op_));
      KERNELD_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(s_), op_));
      return value == 0 ? Status::Ok() : Refused(op_, host_check);
    }
    std::function<Status()> read = [flag = flag_, op = op_,
                                    check = std::move(host_check)]() -> Status {
      KERNELD_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(flag->s), op));
      flag->waited = true;
      return *flag->p == 0 ? Status::Ok() : Refused(op, check);
    };
    if (!ctx_.defer_checks) return read();
    if (ctx_.deferred) {  // a check left before this one: both run
      ctx_.deferred = [first = std::move(ctx_.deferred), second = std::move(read)]() {
        Status a = first();
        Status b = second();
        return a.ok() ? b : a;
      };
    } else {
      ctx_.deferred = std::move(read);
    }
    return Status::Ok();
  }

 private:
  static Status Refused(const char* op, const std::function<Status()>& host_check) {
    Status st = host_check();
    if (!st.ok()) return st;
    return InvalidArgument(std::string(op) +
                           ": an index array failed the device check (and changed since)");
  }

  const char* op_;  // a string literal (it outlives a deferred check)
  KernelContext& ctx_;
  cudaStream_t s_;
  std::shared_ptr<HostFlag> flag_;
  void* base_ = nullptr;
};

// The paged cache's check parameters from ctx.
inline CheckParams PagedCheck(const KernelContext& ctx) {
  CheckParams c;
  const TensorView& kc = ctx.input("k_cache");
  c.batch = static_cast<int>(ctx.input("kv_last_page_len").dim(0));
  c.kv_indptr = ctx.input("kv_indptr").ptr<int32_t>();
  c.kv_total = ctx.input("kv_indices").dim(0);
  c.kv_indices = ctx.input("kv_indices").ptr<int32_t>();
  c.last_page_len = ctx.input("kv_last_page_len").ptr<int32_t>();
  c.max_pages = kc.dim(0);
  c.page_size = kc.dim(1);
  return c;
}

// indices.h's CheckPaged on host copies of ctx's arrays.
inline Status HostCheckPaged(const char* op, const KernelContext& ctx,
                             ::kerneld::attention::PagedIndex* idx,
                             std::vector<std::vector<int32_t>>* keep) {
  keep->push_back(HostInts(ctx.input("kv_indptr")));
  keep->push_back(HostInts(ctx.input("kv_indices")));
  keep->push_back(HostInts(ctx.input("kv_last_page_len")));
  const TensorView& kc = ctx.input("k_cache");
  *idx = {(*keep)[0].data(),
          (*keep)[1].data(),
          (*keep)[2].data(),
          static_cast<int64_t>((*keep)[2].size()),
          static_cast<int64_t>((*keep)[1].size()),
          kc.dim(0),
          kc.dim(1)};
  return ::kerneld::attention::CheckPaged(op, *idx);
}

// The limits of the CUDA impls (the CPU takes the rest): 16-bit types,
// head_dim 64, 128 or 256, int32-sized extents.
inline Requirements AttendRequirements(const char* q_name) {
  Requirements r = Requirements::Cuda(80);
  r.dtypes = {DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kFloat32};
  r.alignment = 16;
  std::string name = q_name;
  r.When("float16 or bfloat16, head_dim 64, 128 or 256, batch < 2^31",
         [name](const KernelContext& ctx) -> std::optional<std::string> {
           const TensorView& q = ctx.input(name);
           if (q.dtype != DType::kFloat16 && q.dtype != DType::kBFloat16)
             return "the cuda impl takes float16 or bfloat16, not " +
                    std::string(DTypeName(q.dtype));
           const int64_t d = q.dim(-1);
           if (d != 64 && d != 128 && d != 256)
             return "the cuda impl takes head_dim 64, 128 or 256, not " + std::to_string(d);
           for (const TensorView& v : ctx.inputs)
             if (v.numel() > (int64_t{1} << 40)) return std::string("a tensor too large");
           return std::nullopt;
         });
  return r;
}

}  // namespace kerneld::cuda::attention
