// The paged KV pools of one model (byte layouts in docs/kv-cache.md). Slot s lives in page
// s / page_size; every pool is indexed by the same slots, so one page table addresses the
// latent rows of every layer, the indexer keys of every full-indexer layer, and the MTP
// layer's own pools (layer index num_hidden_layers).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace tandem {

struct KvCacheOptions {
  int64_t num_pages = 0;
  int64_t page_size = 64;
  // Latent and index-key rows: the compute dtype (f32 on the CPU backend, bf16 on CUDA), or
  // F8_E4M3 for the FP8 rows of ops/kv_fp8.h (656 + 132 bytes on GLM-5), stored as raw bytes.
  DType dtype = DType::F32;
  Device device = Device::cpu();
  bool with_mtp = true;
};

class KvCache {
 public:
  KvCache(const ModelConfig& c, const KvCacheOptions& o);

  // [slots, kv_lora_rank + qk_rope_head_dim]: [c_kv | k_pe] per token. layer == L: MTP layer.
  // FP8: [slots, kv_fp8::latent_row_bytes(kv_lora_rank, qk_rope_head_dim)] e4m3 bytes.
  Tensor& latent(int64_t layer) { return latent_.at(static_cast<size_t>(layer)); }
  // [slots, index_head_dim]: post-LayerNorm, post-RoPE indexer keys; undefined on shared layers.
  // FP8: [slots, index_head_dim + 4] e4m3 bytes (Hadamard-rotated keys and their scale).
  Tensor& index_keys(int64_t layer) { return index_keys_.at(static_cast<size_t>(layer)); }
  bool has_layer(int64_t layer) const { return layer < static_cast<int64_t>(latent_.size()); }

  bool fp8() const { return opts_.dtype == DType::F8_E4M3; }
  int64_t num_pages() const { return opts_.num_pages; }
  int64_t page_size() const { return opts_.page_size; }
  int64_t num_slots() const { return opts_.num_pages * opts_.page_size; }
  // Bytes one token occupies across all pools (for sizing from a memory budget); dtype as in
  // KvCacheOptions.
  static int64_t bytes_per_token(const ModelConfig& c, DType dtype, bool with_mtp);

 private:
  KvCacheOptions opts_;
  std::vector<Tensor> latent_;
  std::vector<Tensor> index_keys_;
};

}  // namespace tandem
