// Launchers of the kernels for quantized weights (docs/quantization.md is the numerics
// contract): FP8 block weights (W8A8, e4m3 with f32 block scales) and MXFP4 weights (e2m1 with
// e8m0 scales per 32, dequantized in registers: the H200 has no FP4 tensor cores). Raw device
// pointers and plain params only, like kernels.h (nvcc and g++ both include it). Strides are in
// elements. Every launcher enqueues on `s`, never synchronizes and never allocates (scratch comes
// from the caller), so all of them are graph-capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace tandem::cuda::k {

// ---- act_quant.cu ---------------------------------------------------------------------------
// ActQuant::kFp8Group: per row m and group b of bk consecutive features (bk >= K: one group),
// amax = max |x|, s = max(amax, 1e-4) / 448 (ue8m0: s = 2^ceil(log2 s)), q = e4m3(x / s)
// (round to nearest even, saturating). x: [M, K] rows strided by xs; q: e4m3 bytes [M, K]
// rows strided by qs (the operand of the decode kernels' e4m3 mma and of cuBLASLt's FP8 GEMMs);
// scale(m, b) = scale[m * s_m + b * s_b] (s_m = kb, s_b = 1 for the decode kernels; s_m = 1, s_b =
// M_padded for cuBLASLt's VEC128 layout kb * M + m). K and bk multiples of 8, K <= 32768
// (act_quant_fp8_applies). x_dt: bf16, or f32 (the MoE intermediate h, quantized from its f32 value
// as the contract says, not from a bf16 rounding of it). early: let the next kernel (a weight
// stream, which fetches its first weight chunks before its pdl_wait) be scheduled as soon as this
// one has passed its own wait (griddepcontrol.launch_dependents); it still waits for this grid to
// complete before it reads q. The dense streams and, since they read their grouping before their
// wait too (MoeGroups::grouping_before_wait), the expert kernels ask for it. Groups of 128 at up
// to 256 rows take a warp each (five shuffles for the maximum), more rows or other group sizes a
// block per row: the same bits either way.
bool act_quant_fp8_applies(int64_t K, int64_t bk);
void act_quant_fp8(const void* x, int64_t xs, DT x_dt, int64_t M, int64_t K, int64_t bk, bool ue8m0,
                   void* q, int64_t qs, float* scale, int64_t s_m, int64_t s_b, cudaStream_t s,
                   bool early = false);

// act_quant_fp8 for the experts' host path (one block-scaled cuBLASLt GEMM per expert, each
// expert's rows padded to a multiple of 4), all experts in one launch: sorted row m of expert e
// (offsets: E + 1 entries, offsets[e] <= m < offsets[e + 1]) is written to row
// pad_off[e] + m - offsets[e] of q (rows qs bytes apart), its group-b scale to
// scale[pad_off[e] * kb + b * np_e + m - offsets[e]] (np_e: the expert's rows rounded up to 4:
// the [kb, np_e] block cuBLASLt reads), and read from x at row m (x_padded false: x in sorted
// order) or at the padded row (x_padded). Groups of 128, K a multiple of 8 up to 32768; the bits
// of act_quant_fp8 row by row.
void act_quant_fp8_experts(const void* x, int64_t xs, DT x_dt, bool x_padded, int64_t rows,
                           int64_t K, bool ue8m0, const int32_t* offsets, const int32_t* pad_off,
                           int64_t E, void* q, int64_t qs, float* scale, cudaStream_t s);

// ActQuant::kMxfp4 activations for the grouped FP8 kernels: act_qdq_mxfp4's values (the same
// quantization) written as FP8 blocks of 128, exactly where the block's groups lie within 8
// binades of each other (mxfp4_fp8.cu states the rule): e4m3 codes q [M, K] (rows qs bytes
// apart) and the block scales 2^E at scale[m * s_m + b * s_b]. K a multiple of 32.
void act_mxfp4_fp8(const void* x, int64_t xs, DT x_dt, int64_t M, int64_t K, void* q, int64_t qs,
                   float* scale, int64_t s_m, int64_t s_b, cudaStream_t s);

// ActQuant::kMxfp4, quantize-dequantize: per row and group of 32, the shared exponent
// floor(log2 amax) - 2 (scale 1 when amax is 0), e2m1 values rounded to nearest even and
// saturating at +-6, written back as bf16 (q * 2^e, exact): the decode kernels then run the
// W4A16 product on it, which equals the W4A4 product up to fp32 summation order.
// x: bf16 or f32 [M, K] rows strided by xs; out: bf16 [M, K] rows strided by os (may be x
// itself when x is bf16); K a multiple of 32.
// early: as act_quant_fp8's (mxfp4_linear's weight-stream path asks for it).
// paired: each aligned block of 8 outputs stored as x0 x4 x1 x5 x2 x6 x3 x7, the bf16 pairs the
// MXFP4 decode kernels' mma takes (quant_mma.cuh), so they load them without permuting; only the
// decode kernels read that order.
void act_qdq_mxfp4(const void* x, int64_t xs, DT x_dt, int64_t M, int64_t K, void* out, int64_t os,
                   cudaStream_t s, bool early = false, bool paired = false);

// ---- quantized weights as the kernels see them ------------------------------------------------
// kFp8Block: w e4m3 [E][N, K] (experts w_es bytes apart); scale f32 [E][ceil(N/bn), >= kb] rows
// strided by s_rs, experts s_es apart. The decode kernels need K a multiple of 16 and bk a
// multiple of 128 or bk >= K (one K block per 128-wide chunk).
struct Fp8W {
  const uint8_t* w = nullptr;
  const float* s = nullptr;
  int64_t s_rs = 0;
  int64_t bn = 128, bk = 128;
  int64_t N = 0, K = 0;
  int64_t w_es = 0, s_es = 0;
};
// kMxfp4: w [E][N, K/2] bytes (two e2m1 per byte, low nibble first); scale e8m0 [E][N, >= K/32]
// rows strided by s_rs. K a multiple of 32.
struct Mx4W {
  const uint8_t* w = nullptr;
  const uint8_t* s = nullptr;
  int64_t s_rs = 0;
  int64_t N = 0, K = 0;
  int64_t w_es = 0, s_es = 0;
};
bool fp8_decode_applies(const Fp8W& w);
bool mxfp4_decode_applies(const Mx4W& w);

// ---- quant_gemv.cu --------------------------------------------------------------------------
// Decode-sized dense linear (M = 1..64 rows; any M works): out[m, n] = x[m] . dequant(w)[n]^T.
// FP8: x is act_quant_fp8's e4m3 output [M, K] (rows x_rs) with scales [M, kb] (rows xs_rs).
// MXFP4: x is bf16 [M, K] (the input itself, or act_qdq_mxfp4's output); xscale unused.
// A block owns 32 weight rows and 8 or 16 activation rows, 4 warps take 128-wide K chunks
// round-robin, each with its next chunk's loads in flight (the stream shape `ring` never changes
// the result: a warp adds its chunks in the same order); K splits (quant_gemv_splits: from N, K
// and the SM count, never from M) write f32 partials [splits, M, N] that each output tile's last
// block (with counters) or a second kernel sums in split order. Every output element is reduced
// in an order fixed by N, K and the GPU: batch-invariant.
struct QGemvParams {
  const void* x = nullptr;
  int64_t x_rs = 0;
  const float* xscale = nullptr;
  int64_t xs_rs = 0;
  void* out = nullptr;  // [M, N] rows strided by o_rs
  int64_t o_rs = 0;
  DT out_dt = DT::BF16;
  int64_t M = 0;
  int64_t splits = 1;
  float* partial = nullptr;  // splits > 1: [splits, M, N] f32 scratch
  // splits > 1, optional: one zeroed int per output tile (quant_gemv_tiles), so the tile's last
  // block sums the partials (no second kernel); each launch leaves them zeroed again.
  int* counters = nullptr;
  // The stream shape (CudaBackend::set_quant_ring: 2, 23 or 24); 0: the format's own.
  int ring = 0;
  // MXFP4: x is in act_qdq_mxfp4's pair order (its `paired` output).
  bool x_paired = false;
};
int64_t quant_gemv_splits(int64_t N, int64_t K, int num_sms);
int64_t quant_gemv_tiles(int64_t M, int64_t N);
void fp8_gemv(const QGemvParams& p, const Fp8W& w, cudaStream_t s);
void mxfp4_gemv(const QGemvParams& p, const Mx4W& w, cudaStream_t s);

// ---- quant_moe.cu ---------------------------------------------------------------------------
// The grouped expert products of moe_experts' device path on quantized experts, with the
// grouping of moe_prepare (kernels.h): counts, offsets, perm, active, num_active, and max_active
// bounding *num_active. gate_up: [E, 2I, D] (rows i and I + i are gate and up of unit i), down:
// [E, D, I]. A tile is 16 units of gate_up (both halves) or 32 rows of down of one expert; the
// grid is the blocks that fit on the GPU at once, each walking tiles and looping over each tile's
// expert rows; the reduction order of a row never depends on how many rows its expert has or
// which block runs its tile (batch-invariant).
struct MoeGroups {
  const int32_t* counts = nullptr;
  const int32_t* offsets = nullptr;
  const int32_t* perm = nullptr;
  const int32_t* active = nullptr;
  const int32_t* num_active = nullptr;
  int64_t max_active = 0;
  int64_t k = 1;      // slots per token (perm[sorted] / k is the token)
  int64_t pairs = 0;  // T * k: picks how many rows one pass takes
  // The kernel launched just before the expert kernel is an activation quantizer called with
  // early = true, which waited for the grouping (written before it) and then let this kernel be
  // scheduled: the grouping is complete when the expert kernel starts, so it reads it and sends
  // its first weight loads before its own pdl_wait (for the quantized activations).
  bool grouping_before_wait = false;
};
// h[sorted, i] = silu(gate) * up, [P, I] in h_dt: f32 where the down weight quantizes its input
// (quantized from the f32 value, as the contract does), bf16 where it takes it as it is. FP8:
// xq = act_quant_fp8(x) e4m3 [T, D] rows xq_rs, scales [T, kb] rows xs_rs (one quantization per
// token, shared by its k slots). I a multiple of 16.
// ring: as QGemvParams::ring (0: the format's own shape).
void fp8_moe_gate_up(const void* xq, int64_t xq_rs, const float* xscale, int64_t xs_rs,
                     const MoeGroups& g, const Fp8W& gate_up, int64_t I, void* h, DT h_dt,
                     cudaStream_t s, int ring = 0);
// y[sorted, d] = down_e[d] . h[sorted], f32 [P, D]. hq = act_quant_fp8(h) e4m3 [P, I] rows hq_rs,
// scales [P, kb] rows hs_rs.
void fp8_moe_down(const void* hq, int64_t hq_rs, const float* hscale, int64_t hs_rs,
                  const MoeGroups& g, const Fp8W& down, float* y, cudaStream_t s, int ring = 0);
// The same with MXFP4 experts on bf16 activations (x as it is, or act_qdq_mxfp4's output;
// x_paired: in its pair order, `paired` there). h is written in the natural order.
void mxfp4_moe_gate_up(const void* x, int64_t xs, const MoeGroups& g, const Mx4W& gate_up,
                       int64_t I, void* h, DT h_dt, cudaStream_t s, int ring = 0,
                       bool x_paired = false);
void mxfp4_moe_down(const void* h, int64_t hs, const MoeGroups& g, const Mx4W& down, float* y,
                    cudaStream_t s, int ring = 0, bool h_paired = false);

// ---- moe_wgmma_fp8.cu -----------------------------------------------------------------------
// The FP8 block experts at prefill sizes: the grouped expert GEMM on 8-bit warpgroup MMA, from
// rows already in expert order. No host sync (graph-safe); batch-invariant. Applies to 128-wide
// K blocks (any block height), I and D multiples of 16, experts stored densely one after another.
bool fp8_moe_wgmma_applies(const Fp8W& gate_up, const Fp8W& down, int64_t E);
// Tile-list entries (4 ints each, 16-byte aligned) the tiles of ne experts need at most.
int64_t fp8_moe_wgmma_max_tiles(int64_t pairs, int64_t ne);
// The rows in expert order: q_sorted[r] = q[perm[r] / k] (e4m3 [T, K] rows, K a multiple of 16)
// and their scales transposed, scale_t[b * ld_t + r] = scale[(perm[r] / k) * kb + b], for
// r < *valid (offsets[E]: the rows routed to this rank).
void moe_gather_fp8(const void* q, const float* scale, int64_t K, int64_t kb, int64_t k,
                    const int32_t* perm, const int32_t* valid, int64_t pairs, void* q_sorted,
                    float* scale_t, int64_t ld_t, cudaStream_t s);
// tiles: the token tiles of experts e_base .. e_base + ne - 1, listed on the device from counts;
// *num_tiles their number.
void fp8_moe_wgmma_tiles(const int32_t* counts, int64_t e_base, int64_t ne, int32_t* tiles,
                         int32_t* num_tiles, cudaStream_t s);
// One of the two GEMMs over the tiles: gate_up (w = the fused [ne, 2I, D] weight) writes
// h = silu(gate) * up, f32 [pairs, I]; down (w = [ne, D, I]) writes y, f32 [pairs, D], for the
// rows of experts e_base .. e_base + ne - 1 (w's experts, in order; tiles listed for them). xq:
// the sorted e4m3 rows [pairs, K]; xs_t: their scales [K / 128, ld_t] (ld_t a multiple of 4:
// the layout act_quant_fp8 writes with s_m = 1, s_b = ld_t).
void fp8_moe_wgmma_gemm(bool gate_up, const void* xq, const float* xs_t, int64_t ld_t,
                        int64_t pairs, const int32_t* counts, const int32_t* offsets, const Fp8W& w,
                        int64_t e_base, int64_t ne, const int32_t* tiles, const int32_t* num_tiles,
                        float* out, cudaStream_t s);

// A dense FP8 block linear (128-wide K blocks, any block height, N a multiple of 4) on the same
// kernel, its M rows one "expert": out[m, n] = x[m] . w[n], bf16 or f32 (out_dt) rows out_rs
// apart (16-byte aligned rows for f32, 8-byte for bf16). xq: e4m3 [M, K] rows K apart; xs_t: its
// scales [K / 128, ld_t] (act_quant_fp8 with s_m = 1, s_b = ld_t, ld_t a multiple of 4 >= M).
// One kernel launch. Batch-invariant: a row's bits do not depend on M.
bool fp8_linear_wgmma_applies(const Fp8W& w);
// The stage shape of the grouped FP8 wgmma kernels (experts and dense linears; the bits do not
// depend on it): k_stage K blocks per ring stage (1, 2 or 4; fewer where two such stages would
// not fit), and 16-row token boxes (more stages) where at most 16 rows are multiplied. The
// backend sets (4, true) at start-up (Switches; TANDEM_FP8_WGMMA_KSTAGE and
// TANDEM_FP8_WGMMA_SMALL_BOX override); without it the kernels take (1, false).
void set_fp8_wgmma_shape(int k_stage, bool small_token_box);
void fp8_linear_wgmma(const void* xq, const float* xs_t, int64_t ld_t, int64_t M, const Fp8W& w,
                      void* out, int64_t out_rs, DT out_dt, cudaStream_t s);

// ---- mxfp4_fp8.cu --------------------------------------------------------------------------
// MXFP4 expert weights as FP8 blocks for the grouped FP8 kernels: experts e0 .. e0 + ne - 1 of w
// into e4m3 q [ne, N, K] and per-row block scales qs [ne, N, K / 128] (an Fp8W with bn = 1),
// exact where a row's groups within a K block lie within 8 binades (the rule: mxfp4_fp8.cu).
bool mxfp4_fp8_applies(const Mx4W& w);  // K a multiple of 512
void mxfp4_to_fp8(const Mx4W& w, int64_t e0, int64_t ne, void* q, float* qs, cudaStream_t s);

// ---- quant_misc.cu --------------------------------------------------------------------------
// out[m, n] = acc[m, n] * xs[m] * ws[n], bf16 or f32 (per-channel FP8 prefill: a per-tensor FP8
// GEMM with unit scales into f32, then this epilogue). acc: f32 [M, N] contiguous; ws read with
// stride ws_stride (a padded [N, >= 1] scale tensor's first column).
void scale_rows_cols(const float* acc, int64_t M, int64_t N, const float* xs, const float* ws,
                     int64_t ws_stride, void* out, int64_t o_rs, DT out_dt, cudaStream_t s);
// MXFP4 prefill: dequantize rows [0, N) of one [N, K/2] + [N, >= K/32] weight into bf16 [N, K]
// (then the bf16 cuBLASLt GEMM runs on it).
void mxfp4_dequant_bf16(const Mx4W& w, int64_t expert, void* out, cudaStream_t s);

}  // namespace tandem::cuda::k
