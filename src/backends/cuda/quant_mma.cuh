// The weight stream shared by the quantized decode kernels (dense and MoE, FP8 and MXFP4).
// At decode sizes these are weight streams like moe_mma.cu: a block owns 32 weight rows (two
// 16-row tiles) and 8 x NT activation rows per pass; its 4 warps take 128-wide K chunks
// round-robin (warp w: chunks w, w + 4, ...), the next chunks' loads in flight while one
// multiplies (q_pass), and the warps' partial sums are added in warp order at the end. So every
// output is reduced in an order fixed by K alone, whatever the number of rows (batch-invariant).
//
// Thread (g, c) of a warp (g = lane / 4, c = lane % 4) owns 32 elements of each chunk (see
// lane_k) for weight rows g and g + 8 of both tiles and for activation row g of each 8-row tile;
// an mma takes whole 4-byte words of them as its k slots (bf16 m16n8k16: elements 4j .. 4j + 3
// as k = {2c, 2c + 1, 2c + 8, 2c + 9}; e4m3 m16n8k32: words u, u + 1 as k = 4c .. 4c + 3 and
// 16 + 4c .. 16 + 4c + 3). Weights and activations agree on this permutation, so each mma is a
// dot product over 16 or 32 of the chunk's k in another order, and loads stay 16 bytes wide.
//
// FP8 (Fp8Fmt): weights and activations (act_quant_fp8's e4m3 bytes, half the bytes of the f16
// copies they replaced) go into the e4m3 mma (m16n8k32, mma_e4m3: exact products, fp32 sums).
// A chunk lies in one K block (bk a multiple of 128, or bk >= K), so each chunk's four mmas per
// tile start from zero and are added to the accumulators times ws[row block, b] * s[token, b].
// MXFP4 (Mx4Fmt): each thread's 32 elements of a row are one e8m0 group; each 8-nibble word
// becomes four bf16x2 pairs (e_i, e_i+4) by a shift and a mask per part (e2m1x8_pairs: the
// values times 2^-126), multiplied by their group's power of two times 2^126 (exact), and meets
// the bf16 activations permuted into the same pairs (prmt) in the bf16 mma. That is 15 integer
// instructions per word where two byte tables took about 20: these kernels are issue-bound.
#pragma once

#include <cuda_bf16.h>

#include "backends/cuda/mma.cuh"
#include "backends/cuda/quant_kernels.h"

namespace tandem::cuda::k {

// 4 warps per block: the kernels hold 120-220 registers per thread, so a block of 4 warps lets
// two or three blocks share an SM, one block's start (first loads) and end (the warp-order
// reduction) overlapping another's steady stream, where 8-warp blocks ran one per SM.
constexpr int kQWarps = 4;
constexpr int kQThreads = 32 * kQWarps;
constexpr int kQChunk = 128;  // K per chunk: one FP8 K block, four MXFP4 groups

// Weights are read once per pass: keep them out of L1.
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ uint32_t word4(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// d += A (16 x 32, row) . B (32 x 8, col): e4m3 in, fp32 accumulate. On sm_90 ptxas lowers it to
// exact e4m3 -> f16 conversions (F2FP.F16.E4M3.UNPACK_B) and two f16 HMMA.16816.F32: the products
// are exact and the sums fp32 (cuobjdump on the H200, 2026-12-04), and an output's bits depend on
// its own row and column only (CudaQuant.GemvBatchInvariant, RingDepthGivesTheSameBits).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Eight e2m1 values (nibbles of v, low first) as four bf16x2 words: out[i] = (e_2i, e_2i+1).
// The magnitude (3 bits) picks the low and the high byte of its bf16 pattern from two 8-byte
// tables (0, 0.5, 1, 1.5, 2, 3, 4, 6 = 0x0000, 3F00, 3F80, 3FC0, 4000, 4040, 4080, 40C0); the
// sign bit is moved to bit 15 / 31.
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t v, uint32_t (&out)[4]) {
  constexpr uint32_t kLo0 = 0xC0800000u, kLo1 = 0xC0804000u;  // low bytes of magnitudes 0-3, 4-7
  constexpr uint32_t kHi0 = 0x3F3F3F00u, kHi1 = 0x40404040u;  // high bytes
  const uint32_t sel0 = v & 0x7777u, sel1 = (v >> 16) & 0x7777u;
  const uint32_t l0 = prmt(kLo0, kLo1, sel0), h0 = prmt(kHi0, kHi1, sel0);
  const uint32_t l1 = prmt(kLo0, kLo1, sel1), h1 = prmt(kHi0, kHi1, sel1);
  // Byte i of (v << 4) has nibble 2i's sign in bit 7; byte i of v has nibble 2i + 1's.
  const uint32_t v4 = v << 4;
  out[0] = prmt(l0, h0, 0x5140u) | (prmt(v, v4, 0x0040u) & 0x80008000u);
  out[1] = prmt(l0, h0, 0x7362u) | (prmt(v, v4, 0x1050u) & 0x80008000u);
  out[2] = prmt(l1, h1, 0x5140u) | (prmt(v, v4, 0x2060u) & 0x80008000u);
  out[3] = prmt(l1, h1, 0x7362u) | (prmt(v, v4, 0x3070u) & 0x80008000u);
}

// 2^(b - 127) in both halves of a bf16x2 (b = 0: the subnormal 2^-127).
__device__ __forceinline__ uint32_t e8m0_bf16x2(uint32_t b) {
  const uint32_t h = b == 0 ? 0x0040u : (b << 7);
  return h | (h << 16);
}

// Eight e2m1 values (nibbles of v, low first) as four bf16x2 words of the values times 2^-126:
// out[i] = (e_i, e_i+4). Each nibble's magnitude bits (e1 e0 m) become bf16 bits 8..6 (the
// exponent's two low bits and the mantissa's top bit: 0.5 is the subnormal 2^-127) and its sign
// bit 15: a shift and a mask per part, no table.
__device__ __forceinline__ void e2m1x8_pairs(uint32_t v, uint32_t (&out)[4]) {
  constexpr uint32_t kSign = 0x80008000u, kMag = 0x01C001C0u;
  out[3] = (v & kSign) | ((v >> 6) & kMag);
  out[2] = ((v << 4) & kSign) | ((v >> 2) & kMag);
  out[1] = ((v << 8) & kSign) | ((v << 2) & kMag);
  out[0] = ((v << 12) & kSign) | ((v << 6) & kMag);
}

// 2^(b - 1) in both halves of a bf16x2, b <= 128.
__device__ __forceinline__ uint32_t e8m0_half_bf16x2(uint32_t b) {
  const uint32_t h = (b + 126) << 7;
  return h | (h << 16);
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162*>(&a);
  const __nv_bfloat162 y = *reinterpret_cast<__nv_bfloat162*>(&b);
  x = __hmul2(x, y);
  return *reinterpret_cast<uint32_t*>(&x);
}

// Where piece q (8 elements) of thread c's 32 elements of a chunk starts, from the chunk's start.
// MXFP4: [32c, 32c + 32), its e8m0 group. FP8: [16c, 16c + 16) then [64 + 16c, 80 + 16c), so
// that one 16-byte weight load of the four lanes c reads 64 contiguous bytes of a row, two whole
// 32-byte sectors: with [32c, 32c + 32) each load used half of four sectors and the L2 moved
// every FP8 weight sector twice (ncu: 49% of the sectors excessive).
template <bool kSplit>
__device__ __forceinline__ int lane_k(int c, int q) {
  return kSplit ? 16 * c + 8 * (q & 1) + 64 * (q >> 1) : 32 * c + 8 * q;
}

// Activation rows of one pass: row 8nt + g of each 8-row tile, and for FP8 the scale rows of
// the rows 8nt + 2c and 8nt + 2c + 1 (the columns of the thread's accumulators). Where a tile has
// no such row the pointers name a row that exists (the pass's first): its products land in
// output columns that are never stored, and every load stays unconditional.
template <int NT>
struct XTile {
  const uint8_t* x[NT];  // the rows' starts (bytes: F::kXBytes per element)
  const float* sx[NT][2];
};

// kFull (template argument below): K is a multiple of the chunk, so no load needs a bounds check
// (the kernels are compiled both ways; GLM-5's K are all multiples of 128).

// This thread's 32 bf16 activations of chunk ch, [32c, 32c + 32) (lane_k<false>), zero past K.
template <int NT, bool kFull>
__device__ __forceinline__ void load_x_slice(uint4 (&v)[4], const XTile<NT>& xt, int nt, int64_t ch,
                                             int c, int64_t K) {
  const auto* x = reinterpret_cast<const uint16_t*>(xt.x[nt]);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int64_t k = ch * kQChunk + lane_k<false>(c, q);
    v[q] = kFull || k < K ? __ldg(reinterpret_cast<const uint4*>(x + k)) : make_uint4(0, 0, 0, 0);
  }
}

// This thread's 32 e4m3 activations of chunk ch, the pieces [16c, 16c + 16) and
// [64 + 16c, 80 + 16c) (lane_k<true>, as the FP8 weights), zero past K (a multiple of 16).
template <int NT, bool kFull>
__device__ __forceinline__ void load_x8_slice(uint4 (&v)[2], const XTile<NT>& xt, int nt,
                                              int64_t ch, int c, int64_t K) {
  const int64_t k0 = ch * kQChunk + 16 * c;
#pragma unroll
  for (int h = 0; h < 2; ++h)
    v[h] = kFull || k0 + 64 * h < K ? __ldg(reinterpret_cast<const uint4*>(xt.x[nt] + k0 + 64 * h))
                                    : make_uint4(0, 0, 0, 0);
}

// Accumulators of one warp: [tile][8-row activation tile][mma C fragment].
template <int NT>
using QAcc = float[2][NT][4];

// ---- FP8 ---------------------------------------------------------------------------------------
struct Fp8Fmt {
  // The stream's shape with NT activation tiles (with_nt_ring's codes): a ring of two chunks;
  // the expert kernels with one tile held to 170 registers (23: three blocks per SM; left free
  // the compiler took 172 and two blocks ran: routed experts at batch 32 68% of copy against
  // 80%), with two tiles free (216 registers: spills when held to 170). The dense kernel takes
  // 160 / 184 registers when free.
  static constexpr int ring(int nt, bool experts) { return experts && nt == 1 ? 23 : 2; }
  static constexpr int kXBytes = 1;  // activations: act_quant_fp8's e4m3 bytes
  // Where this thread's four weight rows are ([tile][row g, g + 8]); a row past N reads row 0
  // (its outputs are never stored).
  struct Rows {
    const uint8_t* w[2][2];  // row start + 16c (lane_k<true>)
    const float* ws[2][2];   // the row's scale row (indexed by K block)
    int64_t K;
    int cpb;  // chunks per K block (bk / 128; bk >= K: every chunk in block 0)
  };
  struct Frag {
    uint4 w[2][2][2];  // [tile][row][two 16-byte halves]
    float ws[2][2];
  };
  static __device__ __forceinline__ Rows rows(const Fp8W& W, int64_t e, const int64_t (&n)[2][2],
                                              int c) {
    Rows r;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int64_t row = n[t][i] < W.N ? n[t][i] : 0;
        r.w[t][i] = W.w + e * W.w_es + row * W.K + 16 * c;
        r.ws[t][i] = W.s + e * W.s_es + (row / W.bn) * W.s_rs;
      }
    r.K = W.K;
    r.cpb = W.bk >= W.K ? 1 << 30 : static_cast<int>(W.bk / kQChunk);
    return r;
  }
  // The K block of chunk ch (one 128 x 128 block per chunk in the common case: no division).
  static __device__ __forceinline__ int64_t block_of(const Rows& r, int64_t ch) {
    return r.cpb == 1 ? ch : ch / r.cpb;
  }
  template <bool kFull>
  static __device__ __forceinline__ void load(Frag& f, const Rows& r, int64_t ch, int c) {
    const int64_t b = block_of(r, ch);
    const int64_t k0 = ch * kQChunk + 16 * c;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint8_t* p = r.w[t][i] + ch * kQChunk;
#pragma unroll
        for (int h = 0; h < 2; ++h)  // pieces lane_k<true>(c, 2h), 16 e4m3 each
          f.w[t][i][h] =
              kFull || k0 + 64 * h < r.K ? ld_stream16(p + 64 * h) : make_uint4(0, 0, 0, 0);
        f.ws[t][i] = __ldg(r.ws[t][i] + b);
      }
  }
  template <int NT, bool kFull>
  static __device__ __forceinline__ void compute(QAcc<NT>& acc, const Frag& f, const Rows& r,
                                                 const XTile<NT>& xt, int64_t ch, int c) {
    const int64_t b = block_of(r, ch);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 xv[2];
      load_x8_slice<NT, kFull>(xv, xt, nt, ch, c, r.K);
      const float s0 = __ldg(xt.sx[nt][0] + b), s1 = __ldg(xt.sx[nt][1] + b);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        // mma j: words u, u + 1 of the thread's 16-byte piece h (k slots 4c.. and 16 + 4c.. of
        // the mma), the same words of rows g (a0, a2), g + 8 (a1, a3) and the activations.
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int h = j >> 1, u = 2 * (j & 1);
          mma_e4m3(d, word4(f.w[t][0][h], u), word4(f.w[t][1][h], u), word4(f.w[t][0][h], u + 1),
                   word4(f.w[t][1][h], u + 1), word4(xv[h], u), word4(xv[h], u + 1));
        }
        // C fragment: d0, d1 = row g, columns 2c, 2c + 1; d2, d3 = row g + 8.
        acc[t][nt][0] = fmaf(d[0], f.ws[t][0] * s0, acc[t][nt][0]);
        acc[t][nt][1] = fmaf(d[1], f.ws[t][0] * s1, acc[t][nt][1]);
        acc[t][nt][2] = fmaf(d[2], f.ws[t][1] * s0, acc[t][nt][2]);
        acc[t][nt][3] = fmaf(d[3], f.ws[t][1] * s1, acc[t][nt][3]);
      }
    }
  }
};

// ---- MXFP4 -------------------------------------------------------------------------------------
// One tile's products (rows g, g + 8 of 16, the thread's group of each chunk) for NT activation
// tiles: the e2m1 words as bf16 pairs times 2^-126, then times 2^(b - 1) (sg, sg8: b <= 128) and,
// where kBig, times the rest of the power of two (hi, hi8: 2^(b - 128) above b = 128, else 1).
template <int NT, bool kBig>
__device__ __forceinline__ void mx4_tile(float (&acc)[NT][4], const uint4 (&w)[2], uint32_t sg,
                                         uint32_t sg8, uint32_t hi, uint32_t hi8,
                                         const uint32_t (&xp)[NT][4][4]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t a[4], b[4];
    e2m1x8_pairs(word4(w[0], q), a);
    e2m1x8_pairs(word4(w[1], q), b);
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = bf16x2_mul(a[i], sg), b[i] = bf16x2_mul(b[i], sg8);
    if (kBig) {
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = bf16x2_mul(a[i], hi), b[i] = bf16x2_mul(b[i], hi8);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      mma_bf16(acc[nt], a[0], b[0], a[1], b[1], xp[nt][q][0], xp[nt][q][1]);
      mma_bf16(acc[nt], a[2], b[2], a[3], b[3], xp[nt][q][2], xp[nt][q][3]);
    }
  }
}

// kPaired: the activations come in pair order (act_qdq_mxfp4's `paired` output: each aligned
// block of 8 stored as x0 x4 x1 x5 x2 x6 x3 x7), so the bf16 pairs the mma takes are whole words
// as loaded; otherwise they are put in that order here (prmt, 4 per 8 activations and tile).
template <bool kPaired>
struct Mx4FmtT {
  // One activation tile: two chunks per warp in 128 registers (24: four blocks per SM, 16-20
  // bytes of spills; routed experts at batch 32 53% of copy against 37-46% with two or three
  // blocks); two tiles in 170 (23, no spills).
  static constexpr int ring(int nt, bool) { return nt == 1 ? 24 : 23; }
  static constexpr int kXBytes = 2;  // activations: bf16
  // A row past N reads row 0 (its outputs are never stored).
  struct Rows {
    const uint8_t* w[2][2];  // row start + 16c bytes
    const uint8_t* s[2][2];  // the row's scales + c
    int64_t K;
  };
  struct Frag {
    uint4 w[2][2];  // 32 e2m1 per row
    uint32_t s[2][2];
  };
  static __device__ __forceinline__ Rows rows(const Mx4W& W, int64_t e, const int64_t (&n)[2][2],
                                              int c) {
    Rows r;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int64_t row = n[t][i] < W.N ? n[t][i] : 0;
        r.w[t][i] = W.w + e * W.w_es + row * (W.K / 2) + 16 * c;
        r.s[t][i] = W.s + e * W.s_es + row * W.s_rs + c;
      }
    r.K = W.K;
    return r;
  }
  template <bool kFull>
  static __device__ __forceinline__ void load(Frag& f, const Rows& r, int64_t ch, int c) {
    // The thread's group lies inside K (always, but in a short last chunk).
    const bool in = kFull || ch * kQChunk + 32 * c < r.K;
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        f.w[t][i] = in ? ld_stream16(r.w[t][i] + ch * (kQChunk / 2)) : make_uint4(0, 0, 0, 0);
        f.s[t][i] = in ? __ldg(r.s[t][i] + ch * (kQChunk / 32)) : 127u;
      }
  }
  template <int NT, bool kFull>
  static __device__ __forceinline__ void compute(QAcc<NT>& acc, const Frag& f, const Rows& r,
                                                 const XTile<NT>& xt, int64_t ch, int c) {
    // Activation pairs (x_i, x_i+4) of each 8-element word q, as the weight pairs come.
    uint32_t xp[NT][4][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 xv[4];
      load_x_slice<NT, kFull>(xv, xt, nt, ch, c, r.K);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t w0 = word4(xv[q], 0), w1 = word4(xv[q], 1);
        const uint32_t w2 = word4(xv[q], 2), w3 = word4(xv[q], 3);
        if (kPaired) {
          xp[nt][q][0] = w0, xp[nt][q][1] = w1, xp[nt][q][2] = w2, xp[nt][q][3] = w3;
        } else {
          xp[nt][q][0] = prmt(w0, w2, 0x5410u), xp[nt][q][1] = prmt(w0, w2, 0x7632u);
          xp[nt][q][2] = prmt(w1, w3, 0x5410u), xp[nt][q][3] = prmt(w1, w3, 0x7632u);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const uint32_t b0 = f.s[t][0], b1 = f.s[t][1];
      // 2^(b - 1): the pairs are the e2m1 values times 2^-126 (above 2^127, in two products).
      const uint32_t sg = e8m0_half_bf16x2(min(b0, 128u)), sg8 = e8m0_half_bf16x2(min(b1, 128u));
      // Scales above 2 are rare (calibrated weights sit near 2^-8): one vote per tile takes the
      // warp down the path with the second product, instead of a branch around it per word.
      if (__any_sync(0xffffffffu, b0 > 128 || b1 > 128))
        mx4_tile<NT, true>(acc[t], f.w[t], sg, sg8, b0 > 128 ? e8m0_bf16x2(b0 - 1) : 0x3F803F80u,
                           b1 > 128 ? e8m0_bf16x2(b1 - 1) : 0x3F803F80u, xp);
      else
        mx4_tile<NT, false>(acc[t], f.w[t], sg, sg8, 0u, 0u, xp);
    }
  }
};
using Mx4Fmt = Mx4FmtT<false>;
using Mx4PairedFmt = Mx4FmtT<true>;

// Warp w's chunks of [ch0, ch1) are ch0 + w, ch0 + w + kQWarps, ...: the i-th goes through
// ring slot i % kQRing. Each slot is reloaded with the chunk kQRing places on as soon as its own
// chunk is multiplied, so one chunk's loads stay in flight while the other multiplies. Measured
// (docs/benchmarks.md): these kernels are bound by how often each warp can issue, not by loads
// in flight; rings of 3, 4 and 6 chunks lost more in blocks per SM (registers) than they gained.
constexpr int kQRing = 2;
template <class F>
using QRing = typename F::Frag[kQRing];

// Loads the ring with the warp's first chunks.
template <class F, bool kFull>
__device__ __forceinline__ void q_ring_fill(QRing<F>& f, const typename F::Rows& wr, int64_t ch0,
                                            int64_t ch1, int warp, int c) {
#pragma unroll
  for (int s = 0; s < kQRing; ++s) {
    const int64_t ch = ch0 + warp + int64_t{kQWarps} * s;
    if (ch < ch1) F::template load<kFull>(f[s], wr, ch, c);
  }
}

// This warp's share of one pass over chunks [ch0, ch1): acc += W[32 rows] . X[8 NT rows]^T.
// f holds the warp's first chunks (q_ring_fill) and is left holding nothing of use.
template <class F, int NT, bool kFull>
__device__ __forceinline__ void q_pass(QAcc<NT>& acc, QRing<F>& f, const typename F::Rows& wr,
                                       const XTile<NT>& xt, int64_t ch0, int64_t ch1, int warp,
                                       int c) {
  for (int64_t base = ch0 + warp; base < ch1; base += int64_t{kQRing} * kQWarps) {
#pragma unroll
    for (int s = 0; s < kQRing; ++s) {
      const int64_t ch = base + int64_t{kQWarps} * s;
      if (ch < ch1) {
        F::template compute<NT, kFull>(acc, f[s], wr, xt, ch, c);
        const int64_t next = ch + int64_t{kQRing} * kQWarps;
        if (next < ch1) F::template load<kFull>(f[s], wr, next, c);
      }
    }
  }
}

// Calls fn.template operator()<NT, B>() with B the blocks per SM the kernel is compiled for
// (__launch_bounds__): `forced` names it (set_quant_ring, for measurements: 2 = no register bound;
// 23 and 24 = held to 170 / 128 registers, three / four blocks per SM) or, for anything else,
// the format's own for NT and the kernel (F::ring). Five blocks (102 registers) spilled 170-550
// bytes and ran slower in every case (MXFP4 experts 40-57% of copy against 44-58%, FP8 48-56%
// against 68-90%; 2026-12-04).
template <class F, class Fn>
void with_nt_ring(int nt, bool experts, int forced, Fn&& fn) {
  const bool known = forced == 2 || forced == 23 || forced == 24;
  const int r = known ? forced : F::ring(nt, experts);
  const auto go = [&]<int NT>() {
    if (r == 23)
      fn.template operator()<NT, 3>();
    else if (r == 24)
      fn.template operator()<NT, 4>();
    else
      fn.template operator()<NT, 1>();
  };
  if (nt == 1)
    go.template operator()<1>();
  else
    go.template operator()<2>();
}

// Writes this warp's partial sums to red [warps][tile][16 rows][8 NT cols] and waits for all.
template <int NT>
__device__ __forceinline__ void q_stash(float* red, const QAcc<NT>& acc, int warp, int lane) {
  constexpr int C = 8 * NT;
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float* r = red + (warp * 2 + t) * 16 * C;
      const int col = 8 * nt + 2 * c;
      r[g * C + col] = acc[t][nt][0];
      r[g * C + col + 1] = acc[t][nt][1];
      r[(g + 8) * C + col] = acc[t][nt][2];
      r[(g + 8) * C + col + 1] = acc[t][nt][3];
    }
  __syncthreads();
}

// Tile t's output (row, col) summed over the warps in warp order.
template <int NT>
__device__ __forceinline__ float q_reduce(const float* red, int t, int row, int col) {
  constexpr int C = 8 * NT;
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < kQWarps; ++w) s += red[(w * 2 + t) * 16 * C + row * C + col];
  return s;
}

template <int NT>
constexpr int q_red_floats() {
  return kQWarps * 2 * 16 * 8 * NT;
}

}  // namespace tandem::cuda::k
