// Thin wrappers of the sm_80+ data-movement and tensor-core instructions
// the tiled kernels use (cp.async with zero fill, ldmatrix, mma.sync
// m16n8k16 with float32 accumulation, packing two floats as a 16-bit
// pair). Below compute capability 8.0 they trap: a kernel using them is
// never launched there (its binding requires 8.0).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace kerneld::cuda::mma {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> the shared address s (SmemAddr), src_bytes of them
// read from gmem and the rest zero-filled (0: nothing is read).
__device__ __forceinline__ void CpAsync16At(uint32_t s, const void* gmem, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes)
               : "memory");
#else
  __trap();  // never launched below 8.0: the binding's requirements say so
#endif
}

// 16 bytes global -> shared, or 16 zeros when !valid (nothing is read);
// CpAsync16Bytes takes the byte count (16 or 0) instead. The two differ
// only in where the count is computed (after the shared address here,
// before it, by the caller, there): each keeps the instruction order its
// kernels were tuned and compiled with.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = SmemAddr(smem);
  CpAsync16At(s, gmem, valid ? 16 : 0);
}
__device__ __forceinline__ void CpAsync16Bytes(void* smem, const void* gmem, int src_bytes) {
  CpAsync16At(SmemAddr(smem), gmem, src_bytes);
}
__device__ __forceinline__ void CpAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Four 8x8 b16 matrices from shared memory; .trans transposes each.
template <bool kTrans>
__device__ __forceinline__ void Ldsm4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(SmemAddr(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(SmemAddr(p)));
#else
  __trap();
#endif
}

// d += a b for one m16n8k16 tile (T: the f16 or bf16 instruction).
template <typename T>
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

// Two floats as a T pair in one register (x in the low half).
template <typename T>
__device__ __forceinline__ uint32_t Pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

}  // namespace kerneld::cuda::mma
