#include "ops/kv_fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace tandem::kv_fp8 {

float ue8m0_scale(float amax) {
  const float s = std::max(amax, kMinAmax) / kE4m3Max;  // normal: >= 2.2e-7
  uint32_t u;
  std::memcpy(&u, &s, 4);
  if (u & 0x007fffffu) u = (u & 0x7f800000u) + 0x00800000u;  // next power of two up
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

void quantize(const float* x, int64_t n, float scale, uint8_t* out) {
  const float inv = 1.0f / scale;  // exact: scale is a power of two
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_fp8_e4m3(x[i] * inv);
}

void quantize_latent_row(const float* x, int64_t n, int64_t dr, uint8_t* row) {
  const int64_t tiles = latent_tiles(n);
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t b = t * kTile, e = std::min(n, b + kTile);
    float amax = 0;
    for (int64_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = ue8m0_scale(amax);
    quantize(x + b, e - b, s, row + b);
    std::memcpy(row + n + 4 * t, &s, 4);
  }
  uint8_t* pe = row + n + 4 * tiles;
  for (int64_t i = 0; i < dr; ++i) {
    const uint16_t h = f32_to_bf16(x[n + i]);
    std::memcpy(pe + 2 * i, &h, 2);
  }
}

void dequantize_latent_row(const uint8_t* row, int64_t n, int64_t dr, float* x) {
  const int64_t tiles = latent_tiles(n);
  for (int64_t t = 0; t < tiles; ++t) {
    float s;
    std::memcpy(&s, row + n + 4 * t, 4);
    for (int64_t i = t * kTile; i < std::min(n, (t + 1) * kTile); ++i)
      x[i] = fp8_e4m3_to_f32(row[i]) * s;
  }
  const uint8_t* pe = row + n + 4 * tiles;
  for (int64_t i = 0; i < dr; ++i) {
    uint16_t h;
    std::memcpy(&h, pe + 2 * i, 2);
    x[n + i] = bf16_to_f32(h);
  }
}

void hadamard(float* x, int64_t d) {
  TD_CHECK(d > 0 && (d & (d - 1)) == 0, "hadamard: size {} is not a power of two", d);
  // Butterflies with stride h = 1, 2, 4, ...: the Sylvester order H_2d = [[H, H], [H, -H]].
  for (int64_t h = 1; h < d; h *= 2)
    for (int64_t i = 0; i < d; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  const float s = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t i = 0; i < d; ++i) x[i] *= s;
}

void quantize_index_row(const float* k, int64_t d, uint8_t* row) {
  std::vector<float> r(k, k + d);
  hadamard(r.data(), d);
  float amax = 0;
  for (float v : r) amax = std::max(amax, std::fabs(v));
  const float s = ue8m0_scale(amax);
  quantize(r.data(), d, s, row);
  std::memcpy(row + d, &s, 4);
}

float read_index_row(const uint8_t* row, int64_t d, float* values) {
  for (int64_t i = 0; i < d; ++i) values[i] = fp8_e4m3_to_f32(row[i]);
  float s;
  std::memcpy(&s, row + d, 4);
  return s;
}

}  // namespace tandem::kv_fp8
