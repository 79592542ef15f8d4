// How one rank's share of a model is cut out of the checkpoint (tensor and expert parallelism,
// SGLang's layout): attention heads, the dense and shared-expert MLPs and the vocabulary are
// split over all tp_size ranks; the routed experts are split into ep_size groups of experts, and
// within a group each expert's intermediate dimension over the tp_size / ep_size ranks of the
// group. Everything else (q_a / kv_a, norms, the router, the DSA indexer, MTP's eh_proj) is
// replicated. docs/parallelism.md has the full table and the reasons.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/weight_names.h"

namespace tandem {

struct ShardSpec {
  int64_t tp_rank = 0;
  int64_t tp_size = 1;  // ranks holding the model (the world)
  int64_t ep_size = 1;  // expert groups; divides tp_size

  bool sharded() const { return tp_size > 1; }
  int64_t moe_tp() const { return tp_size / ep_size; }        // ranks per expert group
  int64_t ep_rank() const { return tp_rank / moe_tp(); }      // this rank's expert group
  int64_t moe_tp_rank() const { return tp_rank % moe_tp(); }  // its place within the group
};

// A contiguous range [begin, begin + size) of one dimension.
struct Span {
  int64_t begin = 0;
  int64_t size = 0;
};

// Throws InvalidArgument naming the dimension when the config cannot be split this way (heads,
// intermediates, experts that do not divide), or the sizes themselves are wrong.
void validate_shard(const ModelConfig& c, const ShardSpec& s);

Span head_span(const ModelConfig& c, const ShardSpec& s);    // attention heads of this rank
Span expert_span(const ModelConfig& c, const ShardSpec& s);  // routed experts of this rank
// Vocabulary rows of this rank's embedding and LM head (equal parts: the vocabulary must divide,
// as GLM-5's 154880 and DeepSeek-V3's 129280 do for every power of two up to 256).
Span vocab_span(const ModelConfig& c, const ShardSpec& s);

// What the loader reads of one checkpoint tensor.
struct ShardCut {
  enum class Kind { kWhole, kRows, kCols, kSkip };
  Kind kind = Kind::kWhole;
  Span span;  // rows or columns kept
  std::string str() const;
};
ShardCut shard_cut(const ModelConfig& c, const ShardSpec& s, const TensorSpec& t);

}  // namespace tandem
