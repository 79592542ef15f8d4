// The FP8 KV-cache row formats (docs/kv-cache.md), host side: sizes, quantization and
// dequantization of one row, and the Hadamard rotation the FP8 indexer applies first. The CPU
// backend stores and reads these rows; the tests use them to build rows the CUDA kernels read.
//
// Latent row of n + dr values ([c_kv | k_pe], n = kv_lora_rank, dr = qk_rope_head_dim):
//   bytes [0, n)                  n x e4m3, c_kv / scale of its tile of 128 values
//   bytes [n, n + 4 * tiles)      tiles = ceil(n / 128) x f32 scale (a power of two)
//   bytes [n + 4 * tiles, + 2 dr) dr x bf16 k_pe (not quantized)
// n = 512, dr = 64 (GLM-5, DeepSeek): 512 + 16 + 128 = 656 bytes.
// Indexer key row of d values (d = index_head_dim): d x e4m3 then one f32 scale: d + 4 bytes
// (132 at d = 128). The stored key is the Hadamard-rotated one.
#pragma once

#include <cstdint>

namespace tandem::kv_fp8 {

constexpr int64_t kTile = 128;      // values per scale
constexpr float kE4m3Max = 448.0f;  // largest finite e4m3
constexpr float kMinAmax = 1e-4f;   // amax floor: an all-zero tile still gets a finite scale

constexpr int64_t latent_tiles(int64_t n) {
  return (n + kTile - 1) / kTile;
}
constexpr int64_t latent_row_bytes(int64_t n, int64_t dr) {
  return n + 4 * latent_tiles(n) + 2 * dr;
}
constexpr int64_t index_row_bytes(int64_t d) {
  return d + 4;
}

// 2^ceil(log2(max(amax, 1e-4) / 448)): the ue8m0-rounded act_quant scale. Computed on the
// bits (round the exponent up unless the mantissa is already zero) so the CUDA kernels, which
// do the same, get the same scale bit for bit.
float ue8m0_scale(float amax);

// e4m3(x / scale) for n values (scale a power of two: the division is exact).
void quantize(const float* x, int64_t n, float scale, uint8_t* out);

// Latent rows: x [n + dr] -> row [latent_row_bytes(n, dr)] and back (dequantization is exact:
// an e4m3 value times a power of two is representable in f32 and bf16).
void quantize_latent_row(const float* x, int64_t n, int64_t dr, uint8_t* row);
void dequantize_latent_row(const uint8_t* row, int64_t n, int64_t dr, float* x);

// In place on x [d], d a power of two: the Sylvester-ordered Walsh-Hadamard transform scaled
// by d^-0.5 (the DeepSeek reference's rotate_activation). Orthogonal: it leaves dot products
// unchanged and spreads outliers across the values before FP8 rounding.
void hadamard(float* x, int64_t d);

// Indexer key rows: k [d] (post-RoPE, not rotated) -> row [index_row_bytes(d)]: a copy of k is
// rotated by hadamard() and quantized with one scale for the row (act_quant with block d).
void quantize_index_row(const float* k, int64_t d, uint8_t* row);
// values [d] = the row's e4m3 values as floats (not scaled); returns the row's scale.
float read_index_row(const uint8_t* row, int64_t d, float* values);

}  // namespace tandem::kv_fp8
