#include "model/kv_cache.h"

#include "core/error.h"
#include "ops/kv_fp8.h"

namespace tandem {

namespace {
// Layers holding pools: the main layers, then the MTP layer when present.
int64_t pool_layers(const ModelConfig& c, bool with_mtp) {
  return c.num_hidden_layers + (with_mtp && c.has_mtp() ? 1 : 0);
}
bool layer_has_index_keys(const ModelConfig& c, int64_t l) {
  if (!c.has_indexer) return false;
  return l >= c.num_hidden_layers || c.indexer_full[static_cast<size_t>(l)];
}
// Row widths in elements of `dtype` (bytes for the FP8 rows).
int64_t latent_width(const ModelConfig& c, DType dtype) {
  return dtype == DType::F8_E4M3 ? kv_fp8::latent_row_bytes(c.kv_lora_rank, c.qk_rope_head_dim)
                                 : c.latent_dim();
}
int64_t index_width(const ModelConfig& c, DType dtype) {
  return dtype == DType::F8_E4M3 ? kv_fp8::index_row_bytes(c.index_head_dim) : c.index_head_dim;
}
}  // namespace

KvCache::KvCache(const ModelConfig& c, const KvCacheOptions& o) : opts_(o) {
  TD_CHECK(o.num_pages > 0 && o.page_size > 0, "kv cache needs pages (got {} x {})", o.num_pages,
           o.page_size);
  const int64_t slots = num_slots();
  for (int64_t l = 0; l < pool_layers(c, o.with_mtp); ++l) {
    // Zero-filled so that a read of a never-written slot is a bug that shows, not garbage.
    latent_.push_back(Tensor::zeros({slots, latent_width(c, o.dtype)}, o.dtype, o.device));
    index_keys_.push_back(layer_has_index_keys(c, l)
                              ? Tensor::zeros({slots, index_width(c, o.dtype)}, o.dtype, o.device)
                              : Tensor());
  }
}

int64_t KvCache::bytes_per_token(const ModelConfig& c, DType dtype, bool with_mtp) {
  int64_t n = 0;
  for (int64_t l = 0; l < pool_layers(c, with_mtp); ++l) {
    n += latent_width(c, dtype) * dtype_size(dtype);
    if (layer_has_index_keys(c, l)) n += index_width(c, dtype) * dtype_size(dtype);
  }
  return n;
}

}  // namespace tandem
