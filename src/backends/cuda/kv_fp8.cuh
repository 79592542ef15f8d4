// Device side of the FP8 KV-cache rows (ops/kv_fp8.h, docs/kv-cache.md): the ue8m0 scale, e4m3
// encoding, reading 8 values of a latent row as bf16 (what the bf16 kernels load from a bf16
// pool), and the Hadamard rotation. Every rounding step is the CPU reference's, in the same
// order, so a row quantized here has the CPU's bytes whenever the inputs agree.
#pragma once

#include <cuda_fp8.h>

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

// Values per latent scale; bytes of a latent row of n quantized + dr bf16 values.
constexpr int kFp8Tile = 128;
__host__ __device__ __forceinline__ int64_t fp8_tiles(int64_t n) {
  return (n + kFp8Tile - 1) / kFp8Tile;
}

// 2^ceil(log2(max(amax, 1e-4) / 448)) on the bits, as kv_fp8::ue8m0_scale.
__device__ __forceinline__ float fp8_scale(float amax) {
  uint32_t u = __float_as_uint(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
  if (u & 0x007fffffu) u = (u & 0x7f800000u) + 0x00800000u;
  return __uint_as_float(u);
}

// e4m3(x), round to nearest even, saturating at +-448 (kv_fp8::quantize with x = v / scale).
__device__ __forceinline__ uint8_t to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// Two e4m3 codes (low byte first) as floats; exact.
__device__ __forceinline__ float2 e4m3x2_to_f2(uint16_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// Values [8v, 8v + 8) of the latent row at `row` (n quantized values in tiles of 128, then
// their scales, then bf16 k_pe), as loaded: two words of e4m3 codes and their tile's scale
// (c_kv), or four words of bf16 (k_pe). n a multiple of 8, so the eight never straddle c_kv and
// k_pe; 4-byte loads (a row is 4-byte aligned, not 16). Split from the conversion so a kernel
// can issue the loads early and convert when it stores.
struct Fp8Chunk {
  uint32_t w[4];
  float s;
};
__device__ __forceinline__ Fp8Chunk fp8_latent_load(const uint8_t* row, int v, int n) {
  const int d = v * 8;
  Fp8Chunk c;
  if (d < n) {
    c.w[0] = __ldg(reinterpret_cast<const uint32_t*>(row + d));
    c.w[1] = __ldg(reinterpret_cast<const uint32_t*>(row + d + 4));
    c.w[2] = c.w[3] = 0;
    c.s = __ldg(reinterpret_cast<const float*>(row + n) + d / kFp8Tile);
  } else {
    const uint32_t* pe =
        reinterpret_cast<const uint32_t*>(row + n + 4 * fp8_tiles(n) + 2 * (d - n));
    c.w[0] = __ldg(pe), c.w[1] = __ldg(pe + 1), c.w[2] = __ldg(pe + 2), c.w[3] = __ldg(pe + 3);
    c.s = 0.f;
  }
  return c;
}
// The chunk as eight bf16 in a 16-byte vector: c_kv dequantized (exact in bf16: an e4m3 value
// times a power of two), k_pe as stored. nope: the chunk is c_kv (8v < n).
__device__ __forceinline__ uint4 fp8_latent_convert(const Fp8Chunk& c, bool nope) {
  if (!nope) return make_uint4(c.w[0], c.w[1], c.w[2], c.w[3]);
  uint32_t out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = e4m3x2_to_f2(static_cast<uint16_t>(c.w[i / 2] >> (16 * (i % 2))));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * c.s, f.y * c.s);
    out[i] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}
__device__ __forceinline__ uint4 fp8_latent_chunk(const uint8_t* row, int v, int n) {
  return fp8_latent_convert(fp8_latent_load(row, v, n), v * 8 < n);
}

// In place on x [d] in shared memory (d a power of two): the Sylvester-ordered Walsh-Hadamard
// butterflies with stride 1, 2, 4, ..., then x *= scale (d^-0.5, computed on the host as the CPU
// does): the same operations in the same order as kv_fp8::hadamard. `nthreads` threads starting
// at thread index `tid` share the work; sync() separates the stages (a warp or block barrier).
template <typename Sync>
__device__ __forceinline__ void hadamard_smem(float* x, int d, float scale, int tid, int nthreads,
                                              Sync sync) {
  for (int h = 1; h < d; h *= 2) {
    for (int p = tid; p < d / 2; p += nthreads) {
      const int j = (p / h) * 2 * h + p % h;  // pair p of this stage: (j, j + h)
      const float a = x[j], b = x[j + h];
      x[j] = a + b;
      x[j + h] = a - b;
    }
    sync();
  }
  for (int i = tid; i < d; i += nthreads) x[i] *= scale;
  sync();
}

}  // namespace tandem::cuda::k
