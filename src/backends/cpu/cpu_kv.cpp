// Paged KV cache writes and per-sequence gathers.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"

namespace tandem::cpu {

void CpuBackend::kv_store(const Tensor& rows, const Tensor& slot_mapping, Tensor& pool) {
  const int64_t T = rows.size(0), R = rows.size(1), S = pool.size(0);
  TD_CHECK(rows.dtype() == pool.dtype(), "kv_store: rows {} vs pool {}", rows.str(), pool.str());
  const int32_t* slots = slot_mapping.data<int32_t>();
  const int64_t es = dtype_size(pool.dtype());
  auto* p = static_cast<char*>(pool.raw());
  const auto* r = static_cast<const char*>(rows.raw());
  for (int64_t t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;  // padding tokens write nowhere
    TD_CHECK(slots[t] < S, "kv_store: slot {} outside the pool of {}", slots[t], S);
    std::memcpy(p + static_cast<int64_t>(slots[t]) * R * es, r + t * rows.stride(0) * es, R * es);
  }
}

void CpuBackend::kv_gather(const Tensor& pool, const AttentionMeta& meta, Tensor& out) {
  const HostMeta m(meta);
  const int64_t R = pool.size(1), es = dtype_size(pool.dtype());
  const auto* p = static_cast<const char*>(pool.raw());
  auto* o = static_cast<char*>(out.raw());
  int64_t row = 0;
  for (int64_t b = 0; b < m.num_seqs; ++b)
    for (int64_t pos = 0; pos < m.seq_lens[b]; ++pos, ++row) {
      TD_CHECK(row < out.size(0), "kv_gather: output has {} rows, sequences need more",
               out.size(0));
      std::memcpy(o + row * R * es, p + m.slot(b, pos) * R * es, R * es);
    }
}

}  // namespace tandem::cpu
