// Activation quantization on the way into a quantized weight (docs/quantization.md,
// "Activations"): FP8 per token and group of bk (kFp8Group) and the MXFP4 quantize-dequantize
// (kMxfp4). One block per row; the row stays in registers between the group maxima and the
// quantization (one read of x).
#include <cuda_fp8.h>

#include <algorithm>

#include "backends/cuda/common.cuh"
#include "backends/cuda/quant_kernels.h"

namespace tandem::cuda::k {

namespace {

constexpr int kVecs = 8;  // 16-byte vectors of the row per thread
// Rows up to which 128-groups take a warp each (act_quant_fp8_g128_kernel); more rows take the
// block kernel, whose threads quantize eight vectors each (fewer, fuller warps).
constexpr int64_t kG128MaxRows = 256;

// Lets the next kernel on the stream (launched with programmatic stream serialization, see
// common.cuh) be scheduled now rather than when this grid's blocks exit; it still waits in its
// pdl_wait() for this grid to complete. Every kernel reads activations only after pdl_wait();
// the weight streams read their first weight chunk before it (weights are never written by the
// kernels of a step), which this overlaps with the quantization. Called after pdl_wait().
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float fp8_scale(float amax, bool ue8m0) {
  float s = fmaxf(amax, 1e-4f) / 448.0f;
  if (ue8m0) {
    // 2^ceil(log2 s) from the bits (s is a positive normal float): exact, where a float log2
    // could round a value just above a power of two down onto it.
    const uint32_t b = __float_as_uint(s);
    if (b & 0x7fffffu) s = __uint_as_float((b & 0x7f800000u) + 0x00800000u);
  }
  return s;
}

// Eight consecutive values of a row (16-byte aligned) as floats.
__device__ __forceinline__ void load8(const bf16* p, float (&f)[8]) {
  bf16x8_to_f(*reinterpret_cast<const uint4*>(p), f);
}
__device__ __forceinline__ void load8(const float* p, float (&f)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

// grid M, block threads (a multiple of 32, threads * kVecs * 8 >= K). smem: kb uints, the
// group maxima as float bits (non-negative floats order like their bits). TX: bf16 rows, or f32
// (the MoE intermediate h, kept in f32 so that it is quantized from the value the contract
// quantizes, not from a bf16 rounding of it). All of a thread's loads are issued before the
// first use (one memory round trip per row, not one per vector: the shared-memory atomics
// between them kept the compiler from hoisting later loads); the group maxima are exact
// whatever the block size, so the launcher picks it freely.
template <typename TX>
__device__ __forceinline__ void quant_row_fp8(const TX* xr, int64_t K, int64_t bk, bool ue8m0,
                                              uint8_t* qr, float* srow, int64_t s_b,
                                              unsigned* gmax) {
  const int nvec = static_cast<int>(K / 8), kb = static_cast<int>((K + bk - 1) / bk);
  const int vpg = bk >= K ? nvec : static_cast<int>(bk / 8);  // 8-value vectors per group
  const int tid = threadIdx.x, nt = blockDim.x;
  float v[kVecs][8];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int vi = tid + j * nt;
    if (vi < nvec) load8(xr + static_cast<int64_t>(vi) * 8, v[j]);
  }
  for (int b = tid; b < kb; b += nt) gmax[b] = 0;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int vi = tid + j * nt;
    if (vi < nvec) {
      float a = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) a = fmaxf(a, fabsf(v[j][i]));
      atomicMax(&gmax[vi / vpg], __float_as_uint(a));
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int vi = tid + j * nt;
    if (vi >= nvec) break;
    const int b = vi / vpg;
    const float s = fp8_scale(__uint_as_float(gmax[b]), ue8m0);
    if (vi - b * vpg == 0) srow[b * s_b] = s;
    uint32_t e[4];  // 8 e4m3, two per 16 bits
#pragma unroll
    for (int i = 0; i < 4; ++i)
      e[i] = __nv_cvt_float2_to_fp8x2(make_float2(v[j][2 * i] / s, v[j][2 * i + 1] / s),
                                      __NV_SATFINITE, __NV_E4M3);
    const uint2 o = make_uint2(e[0] | (e[1] << 16), e[2] | (e[3] << 16));
    *reinterpret_cast<uint2*>(qr + static_cast<int64_t>(vi) * 8) = o;
  }
}

template <typename TX>
__global__ void __launch_bounds__(512)
    act_quant_fp8_kernel(const TX* x, int64_t xs, int64_t K, int64_t bk, bool ue8m0, void* q,
                         int64_t qs, float* scale, int64_t s_m, int64_t s_b, bool early) {
  pdl_wait();
  if (early) pdl_trigger();  // the weight stream behind may fetch its weights (not q) meanwhile
  extern __shared__ unsigned gmax[];
  const int64_t m = blockIdx.x;
  quant_row_fp8(x + m * xs, K, bk, ue8m0, static_cast<uint8_t*>(q) + m * qs, scale + m * s_m, s_b,
                gmax);
}

// grid rows (sorted pair rows of the experts on this rank): row m's expert e is found in offsets
// (the last e with offsets[e] <= m; empty experts have offsets[e] == offsets[e + 1]), and the row
// goes to row pad_off[e] + m - offsets[e] of q with its scales in the expert's [kb, np_e] block.
template <typename TX>
__global__ void __launch_bounds__(512)
    act_quant_fp8_experts_kernel(const TX* x, int64_t xs, bool x_padded, int64_t K, bool ue8m0,
                                 const int32_t* offsets, const int32_t* pad_off, int E, void* q,
                                 int64_t qs, float* scale) {
  pdl_wait();
  extern __shared__ unsigned gmax[];
  const int m = static_cast<int>(blockIdx.x);
  int lo = 0, hi = E;  // offsets[lo] <= m < offsets[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (offsets[mid] <= m)
      lo = mid;
    else
      hi = mid;
  }
  const int e = lo, r = m - offsets[e];
  const int64_t np = (offsets[e + 1] - offsets[e] + 3) / 4 * 4, kb = (K + 127) / 128;
  const int64_t dst = pad_off[e] + r;
  quant_row_fp8(x + (x_padded ? dst : m) * xs, K, int64_t{128}, ue8m0,
                static_cast<uint8_t*>(q) + dst * qs, scale + pad_off[e] * kb + r, np, gmax);
}

// Four consecutive values of a row (8- or 16-byte aligned) as floats.
__device__ __forceinline__ void load4(const bf16* p, float (&f)[4]) {
  const uint2 r = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}
__device__ __forceinline__ void load4(const float* p, float (&f)[4]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
}

// Groups of 128 at decode sizes: one warp per (row, group), lane l on the values 4l .. 4l + 3.
// The group maximum comes from five shuffles instead of shared-memory atomics and a block
// barrier, and a row's groups spread over as many warps as it has groups: at one row the block
// kernel's single block took 3.5-5.7 us on the timeline of a decode step, one memory round trip
// and two barriers in series ahead of every weight stream. Same values and bits as the block
// kernel (the maximum is exact in any order; the scale and the quotients are the same
// expressions).
template <typename TX>
__global__ void act_quant_fp8_g128_kernel(const TX* x, int64_t xs, int64_t M, int64_t K, bool ue8m0,
                                          void* q, int64_t qs, float* scale, int64_t s_m,
                                          int64_t s_b, bool early) {
  pdl_wait();
  if (early) pdl_trigger();
  const int64_t groups = (K + 127) / 128;
  const int64_t gw = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (gw >= M * groups) return;  // whole warps only
  const int64_t m = gw / groups, b = gw - m * groups, k = b * 128 + 4 * lane;
  const bool in = k < K;  // K is a multiple of 8: a lane's four values are all in or all out
  float f[4] = {0.f, 0.f, 0.f, 0.f};
  if (in) load4(x + m * xs + k, f);
  float a = fmaxf(fmaxf(fabsf(f[0]), fabsf(f[1])), fmaxf(fabsf(f[2]), fabsf(f[3])));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  const float sc = fp8_scale(a, ue8m0);
  if (lane == 0) scale[m * s_m + b * s_b] = sc;
  if (!in) return;
  const uint32_t e0 =
      __nv_cvt_float2_to_fp8x2(make_float2(f[0] / sc, f[1] / sc), __NV_SATFINITE, __NV_E4M3);
  const uint32_t e1 =
      __nv_cvt_float2_to_fp8x2(make_float2(f[2] / sc, f[3] / sc), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(q) + m * qs + k) = e0 | (e1 << 16);
}

// e2m1 of a (|a| <= 6 after scaling, else saturated), rounded to nearest even on the grid
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}: the thresholds are the midpoints, ties going to the even code
// (0, 1, 2, 4 have an even mantissa; 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
// 3.5 -> 4, 5 -> 4).
__device__ __forceinline__ float e2m1_rne(float v) {
  const float a = fabsf(v);
  float q;
  if (a <= 0.25f)
    q = 0.f;
  else if (a < 0.75f)
    q = 0.5f;
  else if (a <= 1.25f)
    q = 1.f;
  else if (a < 1.75f)
    q = 1.5f;
  else if (a <= 2.5f)
    q = 2.f;
  else if (a < 3.5f)
    q = 3.f;
  else if (a <= 5.f)
    q = 4.f;
  else
    q = 6.f;
  return copysignf(q, v);
}

// The MXFP4 exponent of a group of 32 held by 8 aligned lanes, 4 values each: floor(log2 amax) - 2
// (floor(log2) = frexp's exponent - 1: exact, subnormals included), 0 for an all-zero group;
// the group's amax through *amax.
__device__ __forceinline__ int mxfp4_group_exponent(const float (&f)[4], float* amax) {
  float a = fmaxf(fmaxf(fabsf(f[0]), fabsf(f[1])), fmaxf(fabsf(f[2]), fabsf(f[3])));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  *amax = a;
  int ex = 0;
  if (a > 0.f) {
    frexpf(a, &ex);
    ex = ex - 1 - 2;
  }
  return ex;
}

// One warp per (row, 4 groups of 32): lane l holds 4 consecutive values; 8 lanes share a group.
// In place (out == x) works for bf16: every value is read before any lane writes. paired: lanes
// 2j and 2j + 1 (one aligned block of 8) swap their values and write x0 x4 x1 x5 / x2 x6 x3 x7.
template <typename TX>
__global__ void act_qdq_mxfp4_kernel(const TX* x, int64_t xs, int64_t M, int64_t K, bf16* out,
                                     int64_t os, bool early, bool paired) {
  pdl_wait();
  if (early) pdl_trigger();  // as act_quant_fp8
  const int64_t warps_per_row = (K + 127) / 128;
  const int64_t gw = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (gw >= M * warps_per_row) return;  // whole warps only
  const int64_t m = gw / warps_per_row, k0 = (gw % warps_per_row) * 128 + lane * 4;
  const bool in = k0 < K;  // K is a multiple of 32: a group is all in or all out
  float f[4] = {0.f, 0.f, 0.f, 0.f};
  if (in) load4(x + m * xs + k0, f);
  float amax;
  const int ex = mxfp4_group_exponent(f, &amax);
  float o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = ldexpf(e2m1_rne(ldexpf(f[i], -ex)), ex);
  __nv_bfloat162 r[2] = {__floats2bfloat162_rn(o[0], o[1]), __floats2bfloat162_rn(o[2], o[3])};
  uint2 v = *reinterpret_cast<uint2*>(r);  // (x0, x1), (x2, x3) of this lane's four
  if (paired) {  // the whole warp swaps (K is a multiple of 32: pairs of lanes agree on `in`)
    const uint32_t p0 = __shfl_xor_sync(0xffffffffu, v.x, 1);
    const uint32_t p1 = __shfl_xor_sync(0xffffffffu, v.y, 1);
    if ((lane & 1) == 0)  // own x0..x3, partner x4..x7: x0 x4 x1 x5
      v = make_uint2(__byte_perm(v.x, p0, 0x5410u), __byte_perm(v.x, p0, 0x7632u));
    else  // own x4..x7, partner x0..x3: x2 x6 x3 x7
      v = make_uint2(__byte_perm(p1, v.y, 0x5410u), __byte_perm(p1, v.y, 0x7632u));
  }
  if (!in) return;
  *reinterpret_cast<uint2*>(out + m * os + k0) = v;
}

// MXFP4 activations as FP8 blocks for the grouped FP8 kernels (the rule: mxfp4_fp8.cu): one warp
// per (row, K block of 128), lane l on values 4l .. 4l + 3 (8 lanes a group): the MXFP4
// quantization of act_qdq_mxfp4_kernel, then E = the largest exponent of the block's non-zero
// groups, each value's e4m3 code of e2m1 * 2^(ex - E) and the block scale 2^E.
template <typename TX>
__global__ void act_mxfp4_fp8_kernel(const TX* x, int64_t xs, int64_t M, int64_t K, uint8_t* q,
                                     int64_t qs, float* scale, int64_t s_m, int64_t s_b) {
  pdl_wait();
  const int64_t blocks = (K + 127) / 128;
  const int64_t gw = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (gw >= M * blocks) return;  // whole warps only
  const int64_t m = gw / blocks, b = gw % blocks, k0 = b * 128 + lane * 4;
  const bool in = k0 < K;  // K is a multiple of 32: a group is all in or all out
  float f[4] = {0.f, 0.f, 0.f, 0.f};
  if (in) load4(x + m * xs + k0, f);
  float amax;
  const int ex = mxfp4_group_exponent(f, &amax);
  // A group's largest value rounds to at least 4 * 2^ex: the group is non-zero iff amax is.
  constexpr int kNoGroup = -100000;
  int eb = amax > 0.f ? ex : kNoGroup;
#pragma unroll
  for (int o = 8; o < 32; o <<= 1) eb = max(eb, __shfl_xor_sync(0xffffffffu, eb, o));
  if (eb == kNoGroup) eb = 0;
  float c[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) c[i] = ldexpf(e2m1_rne(ldexpf(f[i], -ex)), ex - eb);
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(c[0], c[1]), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c[2], c[3]), __NV_SATFINITE, __NV_E4M3);
  if (in) *reinterpret_cast<uint32_t*>(q + m * qs + k0) = lo | (hi << 16);
  if (lane == 0) scale[m * s_m + b * s_b] = ldexpf(1.0f, eb);
}

// Threads of a block quantizing one row of nvec 16-byte vectors, `per` vectors a thread (at most
// kVecs, so every vector has a thread): whole warps, 32 to 512.
int64_t row_block_threads(int64_t nvec, int64_t per) {
  const auto warps_of = [&](int64_t n) { return ((nvec + n - 1) / n + 31) / 32 * 32; };
  return std::min<int64_t>(512, std::max<int64_t>({32, warps_of(per), warps_of(kVecs)}));
}

}  // namespace

bool act_quant_fp8_applies(int64_t K, int64_t bk) {
  return K % 8 == 0 && bk % 8 == 0 && K <= 512 * kVecs * 8;  // 512 threads of ~100 registers
}

void act_quant_fp8(const void* x, int64_t xs, DT x_dt, int64_t M, int64_t K, int64_t bk, bool ue8m0,
                   void* q, int64_t qs, float* scale, int64_t s_m, int64_t s_b, cudaStream_t s,
                   bool early) {
  if (M == 0) return;
  if (bk == 128 && M <= kG128MaxRows) {
    const unsigned blocks = cdiv(M * ((K + 127) / 128), 8);  // 8 warps a block
    if (x_dt == DT::F32)
      launch(act_quant_fp8_g128_kernel<float>, blocks, 256, 0, s, static_cast<const float*>(x), xs,
             M, K, ue8m0, q, qs, scale, s_m, s_b, early);
    else
      launch(act_quant_fp8_g128_kernel<bf16>, blocks, 256, 0, s, static_cast<const bf16*>(x), xs, M,
             K, ue8m0, q, qs, scale, s_m, s_b, early);
    return;
  }
  const int64_t nvec = K / 8;
  // Whole warps, at most kVecs vectors each. Decode sizes (a few rows: a few blocks on a GPU of
  // 100+ SMs) take two vectors a thread, so that the divisions and stores spread over more warps;
  // many rows keep kVecs a thread (fewer, fuller blocks).
  const int64_t threads = row_block_threads(nvec, M <= 256 ? 2 : kVecs);
  const size_t smem = static_cast<size_t>((K + bk - 1) / bk) * sizeof(unsigned);
  const dim3 g(static_cast<unsigned>(M)), b(static_cast<unsigned>(threads));
  if (x_dt == DT::F32)
    launch(act_quant_fp8_kernel<float>, g, b, smem, s, static_cast<const float*>(x), xs, K, bk,
           ue8m0, q, qs, scale, s_m, s_b, early);
  else
    launch(act_quant_fp8_kernel<bf16>, g, b, smem, s, static_cast<const bf16*>(x), xs, K, bk, ue8m0,
           q, qs, scale, s_m, s_b, early);
}

void act_quant_fp8_experts(const void* x, int64_t xs, DT x_dt, bool x_padded, int64_t rows,
                           int64_t K, bool ue8m0, const int32_t* offsets, const int32_t* pad_off,
                           int64_t E, void* q, int64_t qs, float* scale, cudaStream_t s) {
  if (rows == 0) return;
  const int64_t nvec = K / 8;
  const int64_t threads = row_block_threads(nvec, kVecs);
  const size_t smem = static_cast<size_t>((K + 127) / 128) * sizeof(unsigned);
  const dim3 g(static_cast<unsigned>(rows)), b(static_cast<unsigned>(threads));
  if (x_dt == DT::F32)
    launch(act_quant_fp8_experts_kernel<float>, g, b, smem, s, static_cast<const float*>(x), xs,
           x_padded, K, ue8m0, offsets, pad_off, static_cast<int>(E), q, qs, scale);
  else
    launch(act_quant_fp8_experts_kernel<bf16>, g, b, smem, s, static_cast<const bf16*>(x), xs,
           x_padded, K, ue8m0, offsets, pad_off, static_cast<int>(E), q, qs, scale);
}

void act_qdq_mxfp4(const void* x, int64_t xs, DT x_dt, int64_t M, int64_t K, void* out, int64_t os,
                   cudaStream_t s, bool early, bool paired) {
  if (M == 0) return;
  const unsigned blocks = cdiv(M * ((K + 127) / 128), 8);
  if (x_dt == DT::F32)
    launch(act_qdq_mxfp4_kernel<float>, blocks, 256, 0, s, static_cast<const float*>(x), xs, M, K,
           static_cast<bf16*>(out), os, early, paired);
  else
    launch(act_qdq_mxfp4_kernel<bf16>, blocks, 256, 0, s, static_cast<const bf16*>(x), xs, M, K,
           static_cast<bf16*>(out), os, early, paired);
}

void act_mxfp4_fp8(const void* x, int64_t xs, DT x_dt, int64_t M, int64_t K, void* q, int64_t qs,
                   float* scale, int64_t s_m, int64_t s_b, cudaStream_t s) {
  if (M == 0) return;
  const unsigned blocks = cdiv(M * ((K + 127) / 128), 8);
  if (x_dt == DT::F32)
    launch(act_mxfp4_fp8_kernel<float>, blocks, 256, 0, s, static_cast<const float*>(x), xs, M, K,
           static_cast<uint8_t*>(q), qs, scale, s_m, s_b);
  else
    launch(act_mxfp4_fp8_kernel<bf16>, blocks, 256, 0, s, static_cast<const bf16*>(x), xs, M, K,
           static_cast<uint8_t*>(q), qs, scale, s_m, s_b);
}

}  // namespace tandem::cuda::k
