// Hopper tensor-memory-accelerator (TMA) loads and the shared-memory barriers they complete on,
// written against the PTX ISA ("cp.async.bulk.tensor", "mbarrier"); sm_90 only. One thread
// issues a whole tile copy global -> shared; the copy counts its bytes down on an mbarrier,
// which the consumers wait on by phase parity. The host describes each global tensor once
// (a CUtensorMap: base, sizes, strides, box, swizzle) and passes it as a __grid_constant__
// kernel parameter.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tandem::cuda::k {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// An mbarrier expecting `count` arrivals per phase.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Makes barrier initialisation visible to the async proxy (the TMA unit) before first use.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of transactions (the TMA copies of this phase).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Returns once the phase with the given parity (0 for phases 0, 2, ...) has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Box (c0 = innermost element, c1 = row) of a 2-D tensor map into shared memory, completing on
// bar. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// ---- host --------------------------------------------------------------------------------------
// A 2-D tensor [rows, cols] of `type` (elements of elem_bytes, rows ld elements apart: ld *
// elem_bytes a multiple of 16, the base 16-byte aligned) read in boxes of box_rows x box_cols.
// The driver entry point is looked up through the runtime (no link against libcuda).
inline CUtensorMap tma_map_2d(const void* base, CUtensorMapDataType type, int elem_bytes,
                              int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows,
                              CUtensorMapSwizzle swizzle) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (!encode) throw std::runtime_error("cuda: cuTensorMapEncodeTiled is not available");
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld * elem_bytes)};  // bytes, dims 1..
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t step[2] = {1, 1};
  const CUresult r = encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, step,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuda: cuTensorMapEncodeTiled failed (" + std::to_string(r) +
                             ") for a [" + std::to_string(rows) + ", " + std::to_string(cols) +
                             "] tensor");
  return map;
}

// bf16 [rows, cols] read in boxes of box_rows x 64 (128 bytes, the width of the 128-byte
// swizzle, which lays each box out as wgmma_desc's K-major tiles expect: 8-row atoms, piece p of
// row r at p ^ (r % 8)).
inline CUtensorMap tma_map_bf16_2d(const void* base, int64_t rows, int64_t cols, int64_t ld,
                                   int box_rows) {
  return tma_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, rows, cols, ld, 64, box_rows,
                    CU_TENSOR_MAP_SWIZZLE_128B);
}

// The same for bytes (e4m3): boxes of box_rows x 128, the same 128-byte swizzled atoms.
inline CUtensorMap tma_map_u8_2d(const void* base, int64_t rows, int64_t cols, int64_t ld,
                                 int box_rows) {
  return tma_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, rows, cols, ld, 128, box_rows,
                    CU_TENSOR_MAP_SWIZZLE_128B);
}

// f32 [rows, cols] read one row segment at a time (box_cols x 1, unswizzled): a strip of
// per-token scales. The segment's first column must be a multiple of 4 (a box starts on a 16-byte
// boundary; another start is an illegal instruction on the GPU).
inline CUtensorMap tma_map_f32_strip(const void* base, int64_t rows, int64_t cols, int64_t ld,
                                     int box_cols) {
  return tma_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, rows, cols, ld, box_cols, 1,
                    CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace tandem::cuda::k
