// Launchers of the CUDA kernels: raw device pointers and plain params only, so that both nvcc
// (the .cu files that define them) and g++ (cuda_backend.cpp, which validates and calls them)
// can include this header. No core headers here (they pull in fmt, which nvcc cannot compile).
// Strides are in elements. Every launcher enqueues on `s` and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda::k {

// Element types the kernels read and write.
enum class DT : int { F32 = 0, BF16 = 1 };

// The paged-cache part of AttentionMeta, as device pointers.
struct PagedMeta {
  const int32_t* token_seq = nullptr;   // [T]
  const int32_t* token_pos = nullptr;   // [T]
  const int32_t* page_table = nullptr;  // [B, max_pages]
  const int32_t* seq_lens = nullptr;    // [B]
  int64_t max_pages = 0;
  int32_t page_size = 0;
  int32_t num_seqs = 0;
};

// ---- elementwise.cu -------------------------------------------------------------------------
// out[t, i] = silu(x[t, i]) * x[t, I + i]; x rows strided by xs, out contiguous [T, I].
void silu_mul(const void* x, int64_t xs, void* out, int64_t T, int64_t I, DT dt, cudaStream_t s);
// out[t, i] = x[t, i]: bf16 rows strided by xs to contiguous f32 [T, D] (exact; the input of
// LtGemm::gemm_f32, kernel_bench's fp32 baseline).
void bf16_rows_to_f32(const void* x, int64_t xs, float* out, int64_t T, int64_t D, cudaStream_t s);
// out = a + b over n contiguous elements.
void add(const void* a, const void* b, void* out, int64_t n, DT dt, cudaStream_t s);
// An fp32 weight w [N, K] (contiguous) as three bf16 pieces with hi + mid + lo == w exactly: hi
// = bf16(w), mid = bf16(w - hi), lo = w - hi - mid (each difference exact in fp32, and lo fits
// bf16's 8 bits because hi and mid took 16 of w's 24). out: bf16 [3N, K], the hi rows, then mid,
// then lo. With bf16 activations every product x * piece is exact in fp32, so a bf16 tensor-core
// GEMM against [hi; mid; lo] sums the exact products of x . w^T in fp32 (in another order).
void split_f32_bf16x3(const float* w, int64_t N, int64_t K, void* out, cudaStream_t s);
// out[m, n] = (p[m, n] + p[m, N + n]) + p[m, 2N + n]: p f32 [M, 3N] contiguous, out f32 [M, N]
// rows strided by o_rs.
void sum_thirds_f32(const float* p, int64_t M, int64_t N, float* out, int64_t o_rs, cudaStream_t s);

// ---- rows.cu --------------------------------------------------------------------------------
// out[t] = table[ids[t]] ([V, D] rows; ids outside [0, V) give a zero row).
void embedding(const int32_t* ids, int64_t T, const void* table, int64_t vocab_start, int64_t V,
               int64_t D, void* out, DT dt, cudaStream_t s);
// out[t] = [a[t] | b[t]]; out contiguous [T, D1 + D2].
void concat_cols(const void* a, int64_t as, const void* b, int64_t bs, void* out, int64_t T,
                 int64_t D1, int64_t D2, int64_t elem_bytes, cudaStream_t s);
// out[i] = src[rows[i]] (rows outside [0, N) give zeros).
void gather_rows(const void* src, int64_t ss, int64_t N, const int32_t* rows, void* out, int64_t M,
                 int64_t D, int64_t elem_bytes, cudaStream_t s);

// ---- norm.cu --------------------------------------------------------------------------------
// w: [D] f32. x rows strided by xs, out rows by os.
void rms_norm(const void* x, int64_t xs, const float* w, float eps, void* out, int64_t os,
              int64_t T, int64_t D, DT dt, cudaStream_t s);
// h = h + b (bf16), out = rms_norm(h) in one kernel; false (nothing done) unless bf16 rows of a
// multiple of 8 elements on 16-byte boundaries, at most 8192 wide.
bool add_rms_norm(void* h, int64_t hs, const void* b, int64_t bs, const float* w, float eps,
                  void* out, int64_t os, int64_t T, int64_t D, DT dt, cudaStream_t s);
void layer_norm(const void* x, int64_t xs, const float* w, const float* b, float eps, void* out,
                int64_t os, int64_t T, int64_t D, DT dt, cudaStream_t s);

// ---- rope.cu --------------------------------------------------------------------------------
// In place on x: [T, H, d] with strides (s0, s1, 1).
void rope(void* x, int64_t s0, int64_t s1, int64_t T, int64_t H, int64_t d, const int32_t* pos,
          const float* inv_freq, bool interleaved, float attention_factor, DT dt, cudaStream_t s);

// ---- kv_cache.cu ----------------------------------------------------------------------------
// pool[slots[t]] = [rms_norm(x[t, :n], w) | rope(x[t, n:n + dr])], bf16; x rows strided by xs.
// fp8: pool holds the FP8 latent rows of ops/kv_fp8.h (row_bytes each; n a multiple of 8).
void mla_kv_store(const void* x, int64_t xs, const float* w, float eps, int64_t n, int64_t dr,
                  const int32_t* pos, const float* inv_freq, bool interleaved, float af,
                  const int32_t* slots, void* pool, int64_t T, int64_t S, bool fp8,
                  int64_t row_bytes, cudaStream_t s);
// The FP8 indexer-key store: pool[slots[t]] = [e4m3(H rows[t] / s) | s] (D + 4 bytes), H the
// Hadamard rotation scaled by rot_scale = D^-0.5, s the ue8m0 scale; rows bf16 [T, D] strided by
// rs, D a power of two up to 128.
void index_key_store_fp8(const void* rows, int64_t rs, const int32_t* slots, void* pool, int64_t T,
                         int64_t S, int64_t D, float rot_scale, cudaStream_t s);
// pool[slot[t]] = rows[t] (slot < 0: skipped). pool: [S, R] contiguous.
void kv_store(const void* rows, int64_t rs, const int32_t* slots, void* pool, int64_t T, int64_t S,
              int64_t R, int64_t elem_bytes, cudaStream_t s);
// out[start_b + p] = pool[slot(b, p)] for p < seq_lens[b]; max_len bounds seq_lens.
void kv_gather(const void* pool, const PagedMeta& m, int64_t max_len, void* out, int64_t R,
               int64_t elem_bytes, cudaStream_t s);
// The same from FP8 latent rows (n quantized + dr bf16 values each), dequantized into bf16
// out [sum(seq_lens), n + dr]; n and dr multiples of 8.
void kv_gather_fp8(const void* pool, const PagedMeta& m, int64_t max_len, void* out, int64_t n,
                   int64_t dr, cudaStream_t s);

// ---- argmax.cu ------------------------------------------------------------------------------
// out[t] = argmax logits[t] (f32, lowest index on ties, NaN never wins).
// Chunks of a V-wide row that argmax splits it into (its partials: T * chunks of each kind).
int64_t argmax_chunks(int64_t V);
// out[t] = argmax of row t (lowest index on ties). part_v / part_i: [T, argmax_chunks(V)] scratch;
// counters: [T] ints, zero, left zero (when argmax_chunks(V) > 1).
void argmax(const float* logits, int64_t ls, int64_t T, int64_t V, float* part_v, int* part_i,
            int* counters, int32_t* out, cudaStream_t s);

// ---- fill.cu --------------------------------------------------------------------------------
// Deterministic N(0, scale^2)-ish values (sum of uniforms), for benchmarks and tests.
void fill_random(void* p, int64_t n, uint64_t seed, float scale, DT dt, cudaStream_t s);
// The same values encoded: `bytes` e4m3 codes, or (fp4) e2m1 pairs, two values per byte.
void fill_random_codes(uint8_t* p, int64_t bytes, uint64_t seed, float scale, bool fp4,
                       cudaStream_t s);

// ---- mask_logits.cu ------------------------------------------------------------------------
// logits[t, v] = -inf where bit v % 32 of allowed[t * W + v / 32] is clear; logits [T, V] f32
// rows strided by ls, allowed [T, W] with W = (V + 31) / 32.
void mask_logits(float* logits, int64_t ls, int64_t T, int64_t V, const uint32_t* allowed,
                 cudaStream_t s);

// ---- sample.cu ------------------------------------------------------------------------------
// Backend::sample, one CTA per row: logits [T, V] f32 rows strided by ls; temperature, top_p,
// u: [T] f32; top_k: [T] i32; out: [T] i32. Reads the parameters on the device.
void sample(const float* logits, int64_t ls, int64_t T, int64_t V, const float* temperature,
            const int32_t* top_k, const float* top_p, const float* u, int32_t* out, cudaStream_t s);

// ---- gemm.cu ------------------------------------------------------------------------------
// Skinny GEMM: out[b][m, n] = sum_k x[b][m, k] * w[b][n, k], fp32 accumulation. x bf16; w bf16
// or f32; out bf16 or f32. Streams each weight row once per 16 rows of x (the decode case).
struct SkinnyParams {
  const void* x = nullptr;  // bf16 [batch][M, K], rows strided by x_rs, batches by x_bs
  int64_t x_rs = 0, x_bs = 0;
  const void* w = nullptr;  // [batch][N, K] contiguous rows, batches by w_bs
  int64_t w_bs = 0;
  void* out = nullptr;  // [batch][M, N], rows by o_rs, batches by o_bs
  int64_t o_rs = 0, o_bs = 0;
  int64_t M = 0, N = 0, K = 0, batch = 1;
  // Split-K (few output rows, long K): partial sums [splits][batch][M][N] f32, reduced in split
  // order by a second kernel (deterministic). splits = 1: no scratch.
  int64_t splits = 1;
  float* partial = nullptr;
  // Optional (skinny_gemm only): one zeroed int per output tile (skinny_tiles), so the last
  // block of a tile to finish sums its partials in split order itself, and the second kernel
  // is not launched. Each launch leaves them zeroed again. Kernels that may run at the same
  // time need separate counters.
  int* counters = nullptr;
  // fp32 weights: the tile shape of skinny_f32_tiles (measurements and tests); -1: chosen for
  // the shape (skinny_f32_tile_shape), -2: the 2-rows-a-warp skinny kernel. The bits are the
  // same.
  int f32_tile = -1;
};
// Output tiles of the skinny kernel for p (the counters it needs).
int64_t skinny_tiles(const SkinnyParams& p, DT w_dt);
// How many K splits the kernel should use for this shape (1 when the N blocks fill the GPU or
// the vector path does not apply); the caller provides splits * batch * M * N floats of scratch.
int64_t skinny_splits(const SkinnyParams& p, DT w_dt, int num_sms);
void skinny_gemm(const SkinnyParams& p, DT w_dt, DT out_dt, cudaStream_t s);
// out = the sum of the split partials in split order (p.splits > 1).
void skinny_split_reduce(const SkinnyParams& p, DT out_dt, cudaStream_t s);

// ---- skinny_f32_tiles.cu --------------------------------------------------------------------
// The skinny kernel's product for fp32 weights (its K splits and reduction order, so the same
// bits) with each warp on a TM x TN output tile: fast from one row to prefill sizes. Called by
// skinny_gemm for fp32 weights on the vector path; ks = the split length.
int skinny_f32_tile_shapes();
// The shape for p's rows and grid (-1: the 2-rows-a-warp kernel, for operands past 32-bit
// offsets).
int skinny_f32_tile_shape(const SkinnyParams& p);
const char* skinny_f32_tile_name(int shape);
int64_t skinny_f32_tiles_count(const SkinnyParams& p, int shape);  // output tiles (counters)
void skinny_f32_tiles(const SkinnyParams& p, int shape, int64_t ks, DT out_dt, cudaStream_t s);

// ---- gemm_tc.cu -----------------------------------------------------------------------------
// The same product for bf16 weights on the tensor cores, batch-invariant: each output element
// is reduced in an order fixed by N, K, batch and the GPU, whatever M is (see gemm_tc.cu).
// Needs K, x_rs, x_bs, w_bs multiples of 8 and 16-byte aligned x and w (tc_gemm_applies).
bool tc_gemm_applies(const SkinnyParams& p);
// K splits for this shape (never depends on M); the caller provides splits * batch * M * N
// floats of scratch in p.partial when it is more than 1.
int64_t tc_gemm_splits(const SkinnyParams& p, int num_sms);
void tc_gemm(const SkinnyParams& p, DT out_dt, cudaStream_t s);

// ---- moe.cu --------------------------------------------------------------------------------
// Sigmoid routing (see Backend::moe_route). logits [T, E] rows strided by ls.
void moe_route(const float* logits, int64_t ls, const float* bias, int64_t T, int64_t E, int64_t k,
               int64_t n_group, int64_t topk_group, bool normalize, float scaling,
               int64_t local_first, int64_t local_count, int32_t* idx, float* weights,
               cudaStream_t s);
// Work moe_prepare can do in its own block for the grouped wgmma experts, instead of two more
// launches (a decode step of a small model is launch-bound: deterministic mode runs these
// kernels at every batch): the tile list of moe_experts_wgmma (tile_rows > 0: for each expert in
// order (e, 0), (e, tile_rows), ... below its count, *num_tiles the total; the same list as
// its own kernel) and moe_gather_x's copy of the routed rows into expert order (x_sorted
// non-null: only where moe_prepare_gathers says so, which the caller checks).
struct MoePrepareFused {
  int tile_rows = 0;
  int2* tiles = nullptr;
  int32_t* num_tiles = nullptr;
  const void* x = nullptr;  // [T, xs] bf16
  int64_t xs = 0, k = 1, D = 0;
  void* x_sorted = nullptr;  // [pairs, D] bf16
};
// Groups the P = T*k (token, slot) pairs by expert, in pair order within an expert:
// counts[E], offsets[E + 1], perm[sorted] = pair, inv[pair] = sorted (-1: expert id invalid),
// active[a] = the a-th expert with rows (ascending), *num_active.
void moe_prepare(const int32_t* idx, int64_t pairs, int64_t E, int32_t* counts, int32_t* offsets,
                 int32_t* perm, int32_t* inv, int32_t* active, int32_t* num_active, cudaStream_t s,
                 const MoePrepareFused& fused = {});
// Whether moe_prepare copies the rows itself: few bytes (pairs * D * 2 <= 64 KB), 16-byte
// aligned rows.
bool moe_prepare_gathers(int64_t pairs, int64_t D, int64_t xs, const void* x, const void* out);
// h[sorted, i] = silu(x . gate_e[i]) * (x . up_e[i]) for every active expert's rows (bf16 out
// [P, I]). x: [T, D] bf16 rows strided by xs; gate_up: [E, 2I, D] bf16. max_active bounds
// *num_active (min(E, P)).
void moe_gate_up(const void* x, int64_t xs, int64_t k, const void* gate_up, const int32_t* counts,
                 const int32_t* offsets, const int32_t* perm, const int32_t* active,
                 const int32_t* num_active, int64_t max_active, int64_t I, int64_t D, void* h,
                 cudaStream_t s);
// y[sorted, d] = down_e[d] . h[sorted] (f32 out [P, D]). down: [E, D, I] bf16.
void moe_down(const void* h, const void* down, const int32_t* counts, const int32_t* offsets,
              const int32_t* active, const int32_t* num_active, int64_t max_active, int64_t I,
              int64_t D, float* y, cudaStream_t s);
// The same two products on the tensor cores (moe_mma.cu), batch-invariant like the SIMT ones;
// they need I and D multiples of 64 (moe_mma_applies). groups: 16-row groups per pass over the
// weights (1 or 4; the same bits either way).
bool moe_mma_applies(int64_t I, int64_t D);
void moe_gate_up_mma(const void* x, int64_t xs, int64_t k, const void* gate_up,
                     const int32_t* counts, const int32_t* offsets, const int32_t* perm,
                     const int32_t* active, const int32_t* num_active, int64_t max_active,
                     int64_t I, int64_t D, void* h, int groups, cudaStream_t s);
void moe_down_mma(const void* h, const void* down, const int32_t* counts, const int32_t* offsets,
                  const int32_t* active, const int32_t* num_active, int64_t max_active, int64_t I,
                  int64_t D, float* y, int groups, cudaStream_t s);
// Both products at prefill sizes on warpgroup MMA with TMA loads (moe_wgmma.cu), from the rows
// already in expert order (x_sorted [pairs, D], moe_gather_x): lists tiles of up to 256 rows per
// expert on the device, then writes h [pairs, I] bf16 (silu(gate) * up, fused) and y [pairs, D]
// f32. No host sync (graph-safe); batch-invariant. Scratch: tiles (2 * moe_wgmma_max_tiles
// ints, 8-byte aligned), num_tiles (1 int). Needs I and D multiples of 8 (16-byte TMA strides).
bool moe_wgmma_applies(int64_t I, int64_t D);
int64_t moe_wgmma_max_tiles(int64_t pairs, int64_t E);
// tiles_listed: moe_prepare wrote the tile list (MoePrepareFused, tile_rows =
// kMoeWgmmaTileRows); else its own one-block kernel does.
constexpr int kMoeWgmmaTileRows = 256;
void moe_experts_wgmma(const void* gate_up, const void* down, const int32_t* counts,
                       const int32_t* offsets, int64_t pairs, int64_t E, int64_t I, int64_t D,
                       const void* x_sorted, int32_t* tiles, int32_t* num_tiles, void* h, float* y,
                       cudaStream_t s, bool tiles_listed = false);
// xs[sorted] = x[perm[sorted] / k] (bf16 rows) for sorted < pairs, and < *valid when valid is
// given (the routed rows counted on the device: offsets[E]).
void moe_gather_x(const void* x, int64_t xs, int64_t k, const int32_t* perm, int64_t pairs,
                  int64_t D, void* out, cudaStream_t s, const int32_t* valid = nullptr);
// inv_out[p] = pad_off[e] + inv[p] - offsets[e] for each pair p routed to expert e = idx[p]
// (inv_out[p] = -1 where inv[p] is -1 or e is another rank's): the pairs' rows in a layout with
// expert e's rows from pad_off[e] (the FP8 host path's padded GEMM rows), for moe_combine.
void moe_pad_rows(const int32_t* idx, const int32_t* inv, const int32_t* offsets,
                  const int32_t* pad_off, int64_t pairs, int64_t E, int32_t* inv_out,
                  cudaStream_t s);
// out[t, d] = sum_j w[t, j] * y[inv[t * k + j], d] (y f32 or bf16 rows of length D).
void moe_combine(const void* y, DT y_dt, const int32_t* inv, const float* w, int64_t T, int64_t k,
                 int64_t D, void* out, cudaStream_t s);

// ---- attention.cu --------------------------------------------------------------------------
// Absorbed MLA decode over the paged latent pool. Keys of token t: dense 0..pos_t, or its top-k
// row (entries outside [0, pos_t] skipped). Keys are split into num_splits ranges of split_len
// iterations; with one split the kernel writes out directly, else partial results go to
// part_o [T, H, splits, Lc] f32 and part_lse [T, H, splits] and a merge kernel combines them.
struct MlaDecodeParams {
  const void* q = nullptr;  // bf16 [T, H, L], strides (q_s0, q_s1, 1)
  int64_t q_s0 = 0, q_s1 = 0;
  const void* pool = nullptr;  // bf16 [S, L], or FP8 rows [S, kv_row_bytes] (kv_fp8)
  bool kv_fp8 = false;         // pool rows: the first Lc values e4m3 (ops/kv_fp8.h)
  int64_t kv_row_bytes = 0;
  const int32_t* topk = nullptr;  // [T, K] or null (dense)
  int64_t topk_k = 0;
  void* out = nullptr;  // bf16 [T, H, Lc] contiguous
  float* part_o = nullptr;
  float* part_lse = nullptr;
  PagedMeta meta;
  int64_t T = 0, H = 0, L = 0, Lc = 0;
  float scale = 1.0f;
  int64_t split_len = 0, num_splits = 1;
  bool tensor_cores = true;  // mma.sync kernel (attention_mma.cu); false: the SIMT kernel
  bool wide = false;         // with tensor_cores: all 64 heads per block (attention_wide.cu)
  bool wgmma = true;         // with wide: on warpgroup MMA where it applies (attention_wgmma.cu)
  int column_parts = 1;      // wgmma only: blocks per (token, split), each 512 / parts columns
  // The chain (attention_chain.cu) instead of one kernel: its scratch (mla_chain_scratch_bytes),
  // 64-key blocks per token, key blocks per block of its scores kernel (1 or 2).
  void* chain = nullptr;
  int64_t chain_blocks = 0;
  int scores_per_block = 1;
  int chain_value_cols = 64;  // value columns per block of its values kernel: 64, 32 or 16
};
constexpr int kMlaHeadsPerBlock = 16;
constexpr int kMlaKeysPerChunk = 64;
void mla_decode(const MlaDecodeParams& p, cudaStream_t s);
void mla_decode_mma(const MlaDecodeParams& p, cudaStream_t s);  // the tensor-core kernel only
// The 64-heads-per-block kernel applies to H = 64, Lc = 512, L = 576 (GLM-5.x, DeepSeek-V3.x).
bool mla_decode_wide_applies(int64_t H, int64_t L, int64_t Lc);
void mla_decode_wide(const MlaDecodeParams& p, cudaStream_t s);  // that kernel only
// Its warpgroup-MMA form: H = 64, Lc = 512, L = 576, bf16 pool.
bool mla_decode_wgmma_applies(int64_t H, int64_t L, int64_t Lc, bool kv_fp8);
void mla_decode_wgmma(const MlaDecodeParams& p, cudaStream_t s);  // that kernel only
// The one-split wgmma kernel's bits from three kernels over T x blocks, for few query tokens
// (attention_chain.cu). Its scratch per token and 64-key block: S (16 KB f32), P (8 KB bf16),
// corrections and row sums (512 B), row maxima (256 B), key slots (256 B), a key flag (4 B).
constexpr size_t kMlaChainBytesPerBlock = 16384 + 8192 + 512 + 256 + 256 + 4;
inline size_t mla_chain_scratch_bytes(int64_t T, int64_t blocks) {
  return static_cast<size_t>(T * blocks) * kMlaChainBytesPerBlock;
}
void mla_decode_chain(const MlaDecodeParams& p, cudaStream_t s);

// Naive MLA prefill. q [T, H, dqk] (strides), kv [sumL, H, dn + dv] contiguous, k_pe [sumL, dr]
// rows strided by pe_rs; out [T, H, dv] contiguous. topk: null (dense causal) or [T, K] with
// each row's valid positions ascending and -1 padding after them (indexer_topk's layout).
struct MlaPrefillParams {
  const void* q = nullptr;
  int64_t q_s0 = 0, q_s1 = 0;
  const void* kv = nullptr;
  const void* k_pe = nullptr;
  int64_t pe_rs = 0;
  const int32_t* topk = nullptr;
  int64_t topk_k = 0;
  void* out = nullptr;
  PagedMeta meta;
  int64_t T = 0, H = 0, dn = 0, dr = 0, dv = 0;
  float scale = 1.0f;
  bool tensor_cores = true;  // mma.sync kernel (attention_mma.cu); false: the SIMT kernel
};
void mla_prefill(const MlaPrefillParams& p, cudaStream_t s);
void mla_prefill_mma(const MlaPrefillParams& p, cudaStream_t s);  // the tensor-core kernel only

// ---- indexer.cu ----------------------------------------------------------------------------
// score[t, j] = sum_h w[t, h] * relu(q[t, h] . k[slot(j)]) for j <= pos_t, for the tokens
// [t0, t0 + Tc); then out[t] = top-K positions ascending (ties: earlier position), -1 padded.
struct IndexerParams {
  const void* q = nullptr;  // bf16 [T, Hi, Di], strides (q_s0, q_s1, 1)
  int64_t q_s0 = 0, q_s1 = 0;
  const float* w = nullptr;  // [T, Hi] rows strided by w_s0
  int64_t w_s0 = 0;
  const void* pool = nullptr;  // bf16 [S, Di], or FP8 key rows [S, Di + 4] (kv_fp8)
  bool kv_fp8 = false;         // scores by the reference's fp8_index (Backend::indexer_topk)
  float rot_scale = 1;         // Di^-0.5, the Hadamard's scale (FP8 only)
  PagedMeta meta;
  int32_t* out = nullptr;   // [T, K]
  float* scores = nullptr;  // scratch [Tc, max_len]
  int64_t T = 0, Hi = 0, Di = 0, K = 0, max_len = 0;
  bool tensor_cores = true;  // mma.sync scores when Hi is a multiple of 16; false: SIMT scores
};
bool indexer_supports_head_dim(int64_t Di);
void indexer_topk(const IndexerParams& p, int64_t t0, int64_t Tc, cudaStream_t s);
// The selection alone, over scores already in p.scores (p.out, p.K, p.max_len and
// p.meta.token_pos): the second half of indexer_topk, exposed for kernel_bench.
void indexer_select(const IndexerParams& p, int64_t t0, int64_t Tc, cudaStream_t s);

}  // namespace tandem::cuda::k
