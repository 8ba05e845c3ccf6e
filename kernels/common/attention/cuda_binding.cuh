// What the CUDA bindings of the attention ops share: one stream-ordered
// scratch block (the check's flag, then the split-KV workspace), the index
// check launched before the op's kernels, and the flag read back after
// them. A set flag means the kernels returned without touching memory;
// the message then comes from indices.h on a host copy of the arrays (the
// CPU impl's words exactly). The read-back synchronizes the stream: the
// price of an INVALID_ARGUMENT that names the entry, paid after the
// kernels (the worker waits for them anyway).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "common/attention/check.cuh"
#include "common/attention/indices.h"
#include "common/attention/schema.h"
#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda::attention {

// A view's int32 values, copied to the host (the error path only).
inline std::vector<int32_t> HostInts(const TensorView& v) {
  std::vector<int32_t> out(static_cast<size_t>(v.numel()));
  if (!out.empty())
    cudaMemcpy(out.data(), v.raw(), out.size() * sizeof(int32_t), cudaMemcpyDefault);
  return out;
}

class Scratch {
 public:
  Scratch(const char* op, cudaStream_t s) : op_(op), s_(s) {}
  ~Scratch() {
    if (base_) cudaFreeAsync(base_, s_);
  }
  // The flag (zeroed) and `bytes` of workspace after it.
  Status Allocate(size_t bytes) {
    if (cudaError_t e = cudaMallocAsync(&base_, 256 + bytes, s_); e != cudaSuccess) {
      cudaGetLastError();
      base_ = nullptr;
      return ResourceExhausted(std::string(op_) + ": cannot allocate " +
                               std::to_string(256 + bytes) +
                               " bytes of workspace: " + cudaGetErrorString(e));
    }
    return CudaStatus(cudaMemsetAsync(base_, 0, sizeof(int), s_), op_);
  }
  int* err() const { return static_cast<int*>(base_); }
  float* workspace() const { return reinterpret_cast<float*>(static_cast<char*>(base_) + 256); }

  // After the kernels: the flag read back; when set, host_check's message
  // (or a plain one, if the arrays changed since the kernels read them).
  Status Finish(const std::function<Status()>& host_check) {
    int flag = 0;
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(&flag, base_, sizeof(int), cudaMemcpyDeviceToHost, s_), op_));
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(s_), op_));
    if (flag == 0) return Status::Ok();
    Status st = host_check();
    if (!st.ok()) return st;
    return InvalidArgument(std::string(op_) +
                           ": an index array failed the device check (and changed since)");
  }

 private:
  const char* op_;
  cudaStream_t s_;
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
