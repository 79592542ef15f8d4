#include "model/shard.h"

#include "core/error.h"

namespace tandem {

namespace {

void need_divides(int64_t parts, int64_t n, const char* what, const char* flag) {
  if (n % parts != 0)
    throw InvalidArgument(
        fmt::format("{} = {} does not split evenly over {} = {}", what, n, flag, parts));
}

}  // namespace

void validate_shard(const ModelConfig& c, const ShardSpec& s) {
  if (s.tp_size < 1 || s.ep_size < 1)
    throw InvalidArgument(
        fmt::format("--tp-size ({}) and --ep-size ({}) must be >= 1", s.tp_size, s.ep_size));
  if (s.tp_size % s.ep_size != 0)
    throw InvalidArgument(fmt::format(
        "--ep-size {} must divide --tp-size {} (experts are split into ep-size groups of "
        "tp-size / ep-size ranks)",
        s.ep_size, s.tp_size));
  if (s.tp_rank < 0 || s.tp_rank >= s.tp_size)
    throw InvalidArgument(fmt::format("rank {} outside [0, {})", s.tp_rank, s.tp_size));
  if (!s.sharded()) return;
  need_divides(s.tp_size, c.num_attention_heads, "num_attention_heads", "--tp-size");
  need_divides(s.tp_size, c.vocab_size, "vocab_size", "--tp-size");
  if (c.intermediate_size > 0)
    need_divides(s.tp_size, c.intermediate_size, "intermediate_size", "--tp-size");
  if (c.n_routed_experts > 0) {
    need_divides(s.ep_size, c.n_routed_experts, "n_routed_experts", "--ep-size");
    need_divides(s.moe_tp(), c.moe_intermediate_size, "moe_intermediate_size",
                 "--tp-size / --ep-size");
  }
  if (c.n_shared_experts > 0)
    need_divides(s.tp_size, c.moe_intermediate_size * c.n_shared_experts,
                 "the shared experts' intermediate size", "--tp-size");
}

Span head_span(const ModelConfig& c, const ShardSpec& s) {
  const int64_t n = c.num_attention_heads / s.tp_size;
  return {s.tp_rank * n, n};
}

Span expert_span(const ModelConfig& c, const ShardSpec& s) {
  const int64_t n = c.n_routed_experts / s.ep_size;
  return {s.ep_rank() * n, n};
}

Span vocab_span(const ModelConfig& c, const ShardSpec& s) {
  const int64_t n = c.vocab_size / s.tp_size;
  return {s.tp_rank * n, n};
}

std::string ShardCut::str() const {
  switch (kind) {
    case Kind::kWhole:
      return "whole";
    case Kind::kSkip:
      return "not on this rank";
    case Kind::kRows:
      return fmt::format("rows [{}, {})", span.begin, span.begin + span.size);
    case Kind::kCols:
      return fmt::format("columns [{}, {})", span.begin, span.begin + span.size);
  }
  return "";
}

ShardCut shard_cut(const ModelConfig& c, const ShardSpec& s, const TensorSpec& t) {
  if (!s.sharded()) return {};
  const auto rows = [](int64_t begin, int64_t size) {
    return ShardCut{ShardCut::Kind::kRows, {begin, size}};
  };
  const auto cols = [](int64_t begin, int64_t size) {
    return ShardCut{ShardCut::Kind::kCols, {begin, size}};
  };
  const Span h = head_span(c, s);
  const int64_t dqk = c.qk_head_dim(), dkv = c.qk_nope_head_dim + c.v_head_dim;
  const int64_t I = c.intermediate_size / s.tp_size;
  const int64_t Is = c.moe_intermediate_size * c.n_shared_experts / s.tp_size;
  const int64_t Ie = c.moe_intermediate_size / s.moe_tp();
  switch (t.slot) {
    case Slot::kQbProj:
    case Slot::kQProj:  // [H * dqk, in]: this rank's heads
      return rows(h.begin * dqk, h.size * dqk);
    case Slot::kKvbProj:  // [H * (dn + dv), rkv]
      return rows(h.begin * dkv, h.size * dkv);
    case Slot::kOProj:  // [D, H * dv]: row-parallel, summed over ranks
      return cols(h.begin * c.v_head_dim, h.size * c.v_head_dim);
    case Slot::kMlpGate:
    case Slot::kMlpUp:
      return rows(s.tp_rank * I, I);
    case Slot::kMlpDown:
      return cols(s.tp_rank * I, I);
    case Slot::kSharedGate:
    case Slot::kSharedUp:
      return rows(s.tp_rank * Is, Is);
    case Slot::kSharedDown:
      return cols(s.tp_rank * Is, Is);
    case Slot::kExpertGate:
    case Slot::kExpertUp:
    case Slot::kExpertDown: {
      const Span e = expert_span(c, s);
      if (t.expert < e.begin || t.expert >= e.begin + e.size) return {ShardCut::Kind::kSkip, {}};
      return t.slot == Slot::kExpertDown ? cols(s.moe_tp_rank() * Ie, Ie)
                                         : rows(s.moe_tp_rank() * Ie, Ie);
    }
    case Slot::kEmbed:
    case Slot::kLmHead:  // vocab-parallel: a masked lookup / a slice of the logits
      return rows(vocab_span(c, s).begin, vocab_span(c, s).size);
    default:
      return {};
  }
}

}  // namespace tandem
