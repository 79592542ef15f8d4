#include "model/kv_cache.h"

#include "core/error.h"

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
}  // namespace

KvCache::KvCache(const ModelConfig& c, const KvCacheOptions& o) : opts_(o) {
  TD_CHECK(o.num_pages > 0 && o.page_size > 0, "kv cache needs pages (got {} x {})", o.num_pages,
           o.page_size);
  const int64_t slots = num_slots();
  for (int64_t l = 0; l < pool_layers(c, o.with_mtp); ++l) {
    // Zero-filled so that a read of a never-written slot is a bug that shows, not garbage.
    latent_.push_back(Tensor::zeros({slots, c.latent_dim()}, o.dtype, o.device));
    index_keys_.push_back(layer_has_index_keys(c, l)
                              ? Tensor::zeros({slots, c.index_head_dim}, o.dtype, o.device)
                              : Tensor());
  }
}

int64_t KvCache::bytes_per_token(const ModelConfig& c, DType dtype, bool with_mtp) {
  int64_t n = 0;
  for (int64_t l = 0; l < pool_layers(c, with_mtp); ++l) {
    n += c.latent_dim() * dtype_size(dtype);
    if (layer_has_index_keys(c, l)) n += c.index_head_dim * dtype_size(dtype);
  }
  return n;
}

}  // namespace tandem
