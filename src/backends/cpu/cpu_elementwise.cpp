// Embedding, SiLU-and-mul, add, column concat, row gather, argmax.
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "core/rng.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

void CpuBackend::embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, bool shard,
                           Tensor& out) {
  const int64_t T = ids.size(0), V = table.size(0), D = table.size(1);
  const int32_t* id = ids.data<int32_t>();
  const float* tab = f32_ptr(table, "embedding");
  float* o = f32_mut(out, "embedding");
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = id[t] - vocab_start;
    if (row >= 0 && row < V) {
      std::memcpy(o + t * D, tab + row * D, D * sizeof(float));
    } else if (shard) {
      std::memset(o + t * D, 0, D * sizeof(float));  // another rank's row
    } else {
      fail("embedding: token id {} outside the vocabulary [0, {})", id[t], V);
    }
  }
}

void CpuBackend::silu_mul(const Tensor& x, Tensor& out) {
  const int64_t T = x.size(0), I = out.size(1), xs = x.stride(0);
  const float* xp = f32_ptr(x, "silu_mul");
  float* o = f32_mut(out, "silu_mul");
  parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      for (int64_t i = 0; i < I; ++i) o[t * I + i] = silu(xp[t * xs + i]) * xp[t * xs + I + i];
  });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  TD_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(),
           "cpu add needs contiguous tensors");
  const int64_t n = a.numel();
  const float* ap = f32_ptr(a, "add");
  const float* bp = f32_ptr(b, "add");
  float* o = f32_mut(out, "add");
  for (int64_t i = 0; i < n; ++i) o[i] = ap[i] + bp[i];
}

void CpuBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t T = a.size(0), D1 = a.size(1), D2 = b.size(1);
  const float* ap = f32_ptr(a, "concat_cols");
  const float* bp = f32_ptr(b, "concat_cols");
  float* o = f32_mut(out, "concat_cols");
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(o + t * (D1 + D2), ap + t * a.stride(0), D1 * sizeof(float));
    std::memcpy(o + t * (D1 + D2) + D1, bp + t * b.stride(0), D2 * sizeof(float));
  }
}

void CpuBackend::gather_rows(const Tensor& src, const Tensor& rows, Tensor& out) {
  // Any element type: rows are copied byte for byte (hidden states, top-k index rows).
  const int64_t M = rows.size(0), N = src.size(0), D = src.size(1), es = dtype_size(src.dtype());
  TD_CHECK(src.dtype() == out.dtype(), "gather_rows: {} into {}", src.str(), out.str());
  const int32_t* r = rows.data<int32_t>();
  const auto* s = static_cast<const char*>(src.raw());
  auto* o = static_cast<char*>(out.raw());
  for (int64_t i = 0; i < M; ++i) {
    TD_CHECK(r[i] >= 0 && r[i] < N, "gather_rows: row {} outside [0, {})", r[i], N);
    std::memcpy(o + i * D * es, s + r[i] * src.stride(0) * es, static_cast<size_t>(D * es));
  }
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()));
    return;
  }
  const int64_t es = dtype_size(src.dtype());  // [R, C] rows with unit last stride (ops::copy)
  for (int64_t r = 0; r < src.size(0); ++r)
    std::memcpy(static_cast<char*>(dst.raw()) + r * dst.stride(0) * es,
                static_cast<const char*>(src.raw()) + r * src.stride(0) * es,
                static_cast<size_t>(src.size(1) * es));
}

void CpuBackend::argmax(const Tensor& logits, Tensor& out) {
  const int64_t T = logits.size(0), V = logits.size(1);
  const float* l = f32_ptr(logits, "argmax");
  int32_t* o = out.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = l + t * logits.stride(0);
    int64_t best = 0;
    float bv = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v)
      if (row[v] > bv) bv = row[v], best = v;  // strict: the lowest index wins ties; NaN never wins
    o[t] = static_cast<int32_t>(best);
  }
}

void CpuBackend::mask_logits(Tensor& logits, const Tensor& allowed) {
  const int64_t T = logits.size(0), V = logits.size(1), W = allowed.size(1);
  float* l = logits.data<float>();
  const auto* bits = static_cast<const uint32_t*>(allowed.raw());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < T; ++t) {
    float* row = l + t * logits.stride(0);
    const uint32_t* b = bits + t * W;
    for (int64_t v = 0; v < V; ++v)
      if (!((b[v >> 5] >> (v & 31)) & 1u)) row[v] = kNegInf;
  }
}

void CpuBackend::fill_random(Tensor& t, uint64_t seed, float scale) {
  Rng rng(seed);
  if (t.dtype() == DType::F32) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>(scale * rng.normal());
    return;
  }
  if (t.dtype() == DType::FP4X2) {  // two e2m1 values per byte, low nibble first
    auto* p = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint8_t lo = f32_to_fp4_e2m1(static_cast<float>(scale * rng.normal()));
      const uint8_t hi = f32_to_fp4_e2m1(static_cast<float>(scale * rng.normal()));
      p[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
    return;
  }
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  convert_from_f32(t.dtype(), v.data(), t.raw(), t.numel());
}

}  // namespace tandem::cpu
