#include "runtime/draft_vocab.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ops/ops.h"

namespace tandem {

DraftVocab::DraftVocab(const Model& model, Workspace& ws, std::vector<int32_t> ids)
    : ids_(std::move(ids)) {
  const Weight& full = model.weights().lm_head;
  TD_CHECK(!ids_.empty(), "speculative token map: no tokens");
  if (full.quantized())
    throw InvalidArgument(
        "--speculative-token-map needs a dense (bf16) LM head; this one is "
        "quantized");
  if (model.shard().sharded())
    throw InvalidArgument(
        "--speculative-token-map is not supported with tensor parallelism yet (each rank holds "
        "a slice of the LM head)");
  const Device dev = model.device();
  Tensor idx = Tensor::from_vector(ids_, {size()});
  if (!dev.is_cpu()) idx = idx.to(dev);
  // Gathered in the workspace, then copied out: the subset must outlive every step.
  const size_t mark = ws.mark();
  const Tensor rows = ops::gather_rows(ws, full.w, idx);  // [K, D]
  Tensor head = Tensor::empty(rows.shape(), rows.dtype(), dev);
  head.copy_from(rows);
  ws.release(mark);
  head_ = Weight::from_dense(std::move(head));
  ids_column_ = idx.view({size(), 1});
}

bool DraftVocab::subset_mask(const uint32_t* vocab_bits, std::vector<uint32_t>& out) const {
  out.assign(static_cast<size_t>((size() + 31) / 32), 0u);
  bool any = false;
  for (size_t k = 0; k < ids_.size(); ++k) {
    const int32_t t = ids_[k];
    if ((vocab_bits[t >> 5] >> (t & 31)) & 1u) {
      out[k >> 5] |= 1u << (k & 31);
      any = true;
    }
  }
  return any;
}

std::vector<int32_t> read_token_map(const std::string& path, int64_t vocab_size) {
  std::ifstream in(path);
  if (!in)
    throw InvalidArgument(fmt::format("--speculative-token-map {}: cannot open the file", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array())
    throw InvalidArgument(
        fmt::format("--speculative-token-map {}: expected a JSON array of token ids", path));
  if (j.empty())
    throw InvalidArgument(fmt::format("--speculative-token-map {}: no token ids", path));
  std::vector<int32_t> ids;
  std::vector<uint8_t> seen(static_cast<size_t>(vocab_size), 0);
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& v = j[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab_size)
      throw InvalidArgument(
          fmt::format("--speculative-token-map {}: entry {} ({}) is not a token id in [0, {})",
                      path, i, v.dump().substr(0, 40), vocab_size));
    const int32_t t = static_cast<int32_t>(v.get<int64_t>());
    if (seen[static_cast<size_t>(t)])
      throw InvalidArgument(
          fmt::format("--speculative-token-map {}: token {} appears twice (entry {})", path, t, i));
    seen[static_cast<size_t>(t)] = 1;
    ids.push_back(t);
  }
  return ids;
}

}  // namespace tandem
