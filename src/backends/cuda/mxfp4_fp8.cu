// MXFP4 weights as FP8 blocks (act_mxfp4_fp8 in act_quant.cu does the same for activations), so
// that the MXFP4 W4A4 experts' prefill runs on the grouped FP8 wgmma kernels (moe_wgmma_fp8.cu)
// instead of a bf16 dequantization per expert and a bf16 GEMM.
//
// An MXFP4 value is an e2m1 code (0, 0.5, 1, 1.5, 2, 3, 4, 6 with a sign) times its 32-group's
// power of two 2^g. Within a 128-wide K block (four groups) take E = the largest g of the groups
// that hold a non-zero value; each value becomes the e4m3 code of e2m1 * 2^(g - E) and the block
// scale is 2^E. Every e2m1 magnitude times 2^-d is an e4m3 number for d = 0..8 (0.5 * 2^-8 is
// e4m3's smallest subnormal), so the conversion is exact unless a group lies more than 8
// binades below its block's largest; then the code is the nearest e4m3 (ties to even), an error
// below 2^-10 of the block's scale. The product of two such operands in the FP8 kernel is then
// the MXFP4 product up to the order of its sums.
#include <cuda_fp8.h>

#include "backends/cuda/common.cuh"
#include "backends/cuda/quant_kernels.h"

namespace tandem::cuda::k {

namespace {

constexpr int kNoGroup = -100000;  // the exponent of a block without a non-zero value

// Four floats to four e4m3 bytes (round to nearest even, saturating), packed low first.
__device__ __forceinline__ uint32_t e4m3x4(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// The e4m3 codes of four e2m1 values (the nibbles in bits 0..15 of `nibs`, bit 3 of each the
// sign) times 2^d, from the table of the eight magnitudes' codes (t0: 0, 0.5, 1, 1.5; t1: 2, 3,
// 4, 6 times 2^d): the magnitudes select bytes of the table, the signs are or-ed in (e4m3
// rounding is symmetric, so -v is v's code with the sign bit).
__device__ __forceinline__ uint32_t e4m3_of_nibbles(uint32_t nibs, uint32_t t0, uint32_t t1) {
  uint32_t spread = nibs & 0xffffu;  // nibble i to the low half of byte i
  spread = (spread | (spread << 8)) & 0x00ff00ffu;
  spread = (spread | (spread << 4)) & 0x0f0f0f0fu;
  return __byte_perm(t0, t1, nibs & 0x7777u) | ((spread & 0x08080808u) << 4);
}

// The largest of the exponents held by `lanes` consecutive lanes (a power of two, aligned).
template <int kLanes>
__device__ __forceinline__ int max_over(int v) {
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Weights: one warp per 512 values of a row (four K blocks); lane l holds 16 values (8 bytes,
// half of group l / 2, in block l / 8). Rows of experts e0 .. e0 + ne - 1 in order.
__global__ void mxfp4_to_fp8_kernel(const uint8_t* w, const uint8_t* s, int64_t s_rs, int64_t w_es,
                                    int64_t s_es, int64_t e0, int64_t N, int64_t K, int64_t units,
                                    uint8_t* q, float* qs) {
  pdl_wait();
  const int64_t gw = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (gw >= units) return;  // whole warps only
  const int64_t per_row = K / 512, row = gw / per_row, k0 = (gw % per_row) * 512 + lane * 16;
  const int64_t e = e0 + row / N, n = row % N;
  const uint2 v = *reinterpret_cast<const uint2*>(w + e * w_es + n * (K / 2) + k0 / 2);
  const int g = static_cast<int>(s[e * s_es + n * s_rs + k0 / 32]) - 127;
  const bool mine = ((v.x | v.y) & 0x77777777u) != 0u;
  // Every lane shuffles (a shuffle skipped by some lanes of the mask is undefined).
  const bool other = __shfl_xor_sync(0xffffffffu, mine, 1);  // the other half of the group
  int eb = max_over<8>(mine || other ? g : kNoGroup);
  if (eb == kNoGroup) eb = 0;
  const int d = g - eb;
  const uint32_t t0 = e4m3x4(0.0f, ldexpf(0.5f, d), ldexpf(1.0f, d), ldexpf(1.5f, d));
  const uint32_t t1 = e4m3x4(ldexpf(2.0f, d), ldexpf(3.0f, d), ldexpf(4.0f, d), ldexpf(6.0f, d));
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = e4m3_of_nibbles((i < 2 ? v.x : v.y) >> (16 * (i % 2)), t0, t1);
  *reinterpret_cast<uint4*>(q + row * K + k0) = make_uint4(o[0], o[1], o[2], o[3]);
  if ((lane & 7) == 0) qs[row * (K / 128) + k0 / 128] = ldexpf(1.0f, eb);
}

}  // namespace

bool mxfp4_fp8_applies(const Mx4W& w) {
  return w.K % 512 == 0 && w.s_rs >= w.K / 32;
}

void mxfp4_to_fp8(const Mx4W& w, int64_t e0, int64_t ne, void* q, float* qs, cudaStream_t s) {
  const int64_t units = ne * w.N * (w.K / 512);
  if (units == 0) return;
  launch(mxfp4_to_fp8_kernel, cdiv(units, 8), 256, 0, s, w.w, w.s, w.s_rs, w.w_es, w.s_es, e0, w.N,
         w.K, units, static_cast<uint8_t*>(q), qs);
}

}  // namespace tandem::cuda::k
