// append_paged_kv_cache, CUDA binding: the index check, the copy of
// cuda.cuh, the flag read back (common/attention/cuda_binding.cuh).
#include "common/attention/cuda_binding.cuh"
#include "kerneld/op.h"
#include "ops/append_paged_kv_cache/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status AppendPagedKvCache(KernelContext& ctx) {
  const char* op = "append_paged_kv_cache";
  cudaStream_t s = StreamOf(ctx);
  const TensorView& key = ctx.input("append_key");
  attention::CheckParams c = attention::PagedCheck(ctx);
  c.batch_indices = ctx.input("batch_indices").ptr<int32_t>();
  c.positions = ctx.input("positions").ptr<int32_t>();
  c.nnz_append = key.dim(0);
  const TensorView* in[2] = {&ctx.input("k_cache"), &ctx.input("v_cache")};
  TensorView* out[2] = {&ctx.output("k_cache"), &ctx.output("v_cache")};
  for (int i = 0; i < 2; ++i)  // in place is the contract; a distinct output gets the cache first
    if (out[i]->raw() != in[i]->raw())
      KERNELD_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(out[i]->raw(), in[i]->raw(), static_cast<size_t>(in[i]->nbytes()),
                          cudaMemcpyDeviceToDevice, s),
          "append_paged_kv_cache: copying the cache"));
  attention::Scratch scratch(op, ctx);
  KERNELD_RETURN_IF_ERROR(scratch.Allocate(0));
  c.err = scratch.err();
  c.host_err = scratch.host_err();
  append::AppendParams p;
  p.key = static_cast<const char*>(key.raw());
  p.value = static_cast<const char*>(ctx.input("append_value").raw());
  p.k_cache = static_cast<char*>(out[0]->raw());
  p.v_cache = static_cast<char*>(out[1]->raw());
  p.batch_indices = c.batch_indices;
  p.positions = c.positions;
  p.kv = {c.kv_indptr, c.kv_indices, c.last_page_len,
          c.kv_total,  c.max_pages,  static_cast<int>(c.page_size)};
  p.err = scratch.err();
  p.nnz = key.dim(0);
  p.batch = c.batch;
  p.hkv = static_cast<int>(key.dim(1));
  p.row_bytes = key.dim(2) * static_cast<int64_t>(ItemSize(key.dtype));
  KERNELD_RETURN_IF_ERROR(CudaStatus(attention::CheckIndices(c, ctx.device.sm_count, s), op));
  KERNELD_RETURN_IF_ERROR(CudaStatus(append::Append(p, ctx.device.sm_count, s), op));
  return scratch.Finish([op, &ctx]() -> Status {
    ::kerneld::attention::PagedIndex idx;
    std::vector<std::vector<int32_t>> keep;
    KERNELD_RETURN_IF_ERROR(attention::HostCheckPaged(op, ctx, &idx, &keep));
    const std::vector<int32_t> b = attention::HostInts(ctx.input("batch_indices"));
    const std::vector<int32_t> pos = attention::HostInts(ctx.input("positions"));
    return ::kerneld::attention::CheckAppend(op, idx, b.data(), pos.data(),
                                             static_cast<int64_t>(pos.size()));
  });
}

Requirements AppendRequirements() {
  Requirements r = Requirements::Cuda(80);
  r.alignment = 16;
  r.When("head_dim * item size a multiple of 16 bytes", [](const KernelContext& ctx) {
    const TensorView& k = ctx.input("append_key");
    return (k.dim(2) * static_cast<int64_t>(ItemSize(k.dtype))) % 16 == 0
               ? std::nullopt
               : std::optional<std::string>("the cuda impl copies 16-byte units: head_dim * " +
                                            std::to_string(ItemSize(k.dtype)) +
                                            " bytes is not a multiple of 16");
  });
  return r;
}

}  // namespace

KERNELD_IMPL(append_paged_kv_cache, cuda) {
  op.Impl("cuda", AppendPagedKvCache, AppendRequirements(), kPriorityDevice);
}

}  // namespace kerneld::cuda
