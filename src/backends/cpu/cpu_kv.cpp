// Paged KV cache writes and per-sequence gathers, in the compute dtype or the FP8 rows of
// ops/kv_fp8.h (quantized on the way in, dequantized on the way out).
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "ops/kv_fp8.h"

namespace tandem::cpu {

void CpuBackend::kv_store(const Tensor& rows, const Tensor& slot_mapping, Tensor& pool) {
  const int64_t T = rows.size(0), R = rows.size(1), S = pool.size(0);
  const int32_t* slots = slot_mapping.data<int32_t>();
  if (pool.dtype() == DType::F8_E4M3) {  // indexer keys: [S, R + 4] rotated, quantized rows
    const float* r = f32_ptr(rows, "kv_store");
    auto* p = pool.data<uint8_t>();
    for (int64_t t = 0; t < T; ++t) {
      if (slots[t] < 0) continue;
      TD_CHECK(slots[t] < S, "kv_store: slot {} outside the pool of {}", slots[t], S);
      kv_fp8::quantize_index_row(r + t * rows.stride(0), R, p + slots[t] * pool.size(1));
    }
    return;
  }
  TD_CHECK(rows.dtype() == pool.dtype(), "kv_store: rows {} vs pool {}", rows.str(), pool.str());
  const int64_t es = dtype_size(pool.dtype());
  auto* p = static_cast<char*>(pool.raw());
  const auto* r = static_cast<const char*>(rows.raw());
  for (int64_t t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;  // padding tokens write nowhere
    TD_CHECK(slots[t] < S, "kv_store: slot {} outside the pool of {}", slots[t], S);
    std::memcpy(p + static_cast<int64_t>(slots[t]) * R * es, r + t * rows.stride(0) * es, R * es);
  }
}

void CpuBackend::mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                              const Tensor& inv_freq, const RopeParams& p,
                              const Tensor& slot_mapping, Tensor& pool) {
  if (pool.dtype() != DType::F8_E4M3) {
    Backend::mla_kv_store(x, w, eps, positions, inv_freq, p, slot_mapping, pool);
    return;
  }
  // The f32 row exactly as the unquantized path builds it, then quantized into the pool.
  const int64_t T = x.size(0), n = w.size(0), dr = x.size(1) - n, S = pool.size(0);
  Tensor row = Tensor::empty({T, n + dr}, DType::F32);  // [T, n + dr]
  Tensor c = row.narrow(1, 0, n);
  rms_norm(x.narrow(1, 0, n), w, eps, c);
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(row.data<float>() + t * (n + dr) + n,
                f32_ptr(x, "mla_kv_store") + t * x.stride(0) + n, dr * sizeof(float));
  Tensor pe = row.narrow(1, n, dr).unsqueeze(1);  // [T, 1, dr]
  rope(pe, positions, inv_freq, p);
  const int32_t* slots = slot_mapping.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;
    TD_CHECK(slots[t] < S, "mla_kv_store: slot {} outside the pool of {}", slots[t], S);
    kv_fp8::quantize_latent_row(row.data<float>() + t * (n + dr), n, dr,
                                pool.data<uint8_t>() + slots[t] * pool.size(1));
  }
}

void CpuBackend::kv_gather(const Tensor& pool, const AttentionMeta& meta, int64_t fp8_nope,
                           Tensor& out) {
  const HostMeta m(meta);
  const bool fp8 = pool.dtype() == DType::F8_E4M3;
  const int64_t R = pool.size(1), es = dtype_size(pool.dtype()), L = out.size(1);
  TD_CHECK(fp8 || out.dtype() == pool.dtype(), "kv_gather: out {} vs pool {}", out.str(),
           pool.str());
  const auto* p = static_cast<const char*>(pool.raw());
  auto* o = static_cast<char*>(out.raw());
  float* of = fp8 ? f32_mut(out, "kv_gather") : nullptr;
  int64_t row = 0;
  for (int64_t b = 0; b < m.num_seqs; ++b)
    for (int64_t pos = 0; pos < m.seq_lens[b]; ++pos, ++row) {
      TD_CHECK(row < out.size(0), "kv_gather: output has {} rows, sequences need more",
               out.size(0));
      const char* src = p + m.slot(b, pos) * R * es;
      if (fp8)
        kv_fp8::dequantize_latent_row(reinterpret_cast<const uint8_t*>(src), fp8_nope, L - fp8_nope,
                                      of + row * L);
      else
        std::memcpy(o + row * R * es, src, R * es);
    }
}

}  // namespace tandem::cpu
