#include "runtime/generator.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "runtime/batch_builder.h"

namespace tandem {

namespace {
int64_t pages_for(int64_t len, int64_t page_size) {
  return (len + page_size - 1) / page_size;
}
}  // namespace

Generator::Generator(const Model& model, int64_t max_len, int64_t page_size, bool kv_fp8)
    : model_(model), page_size_(page_size), pages_(pages_for(max_len, page_size)) {
  KvCacheOptions o;
  o.num_pages = pages_for(max_len, page_size);
  o.page_size = page_size;
  o.device = model.device();
  o.dtype = kv_fp8 ? DType::F8_E4M3 : model.device().is_cpu() ? DType::F32 : DType::BF16;
  o.with_mtp = false;
  cache_ = std::make_unique<KvCache>(model.config(), o);
}

GenerateResult Generator::generate(const GenerateRequest& req,
                                   const std::function<bool(int32_t)>& on_token) {
  TD_CHECK(!req.prompt.empty(), "generate: empty prompt");
  const int64_t V = model_.config().vocab_size;
  for (int32_t id : req.prompt)
    if (id < 0 || id >= V)
      throw InvalidArgument(fmt::format("token id {} outside the vocabulary [0, {})", id, V));
  const int64_t prompt_len = static_cast<int64_t>(req.prompt.size());
  if (req.max_new_tokens > INT64_MAX / 2 - prompt_len)  // prompt + max_new_tokens would overflow
    throw InvalidArgument(fmt::format("max_new_tokens {} is too large", req.max_new_tokens));
  const int64_t total = prompt_len + req.max_new_tokens;
  std::vector<int32_t> pages;
  if (!pages_.allocate(pages_for(total, page_size_), pages))
    throw InvalidArgument(
        fmt::format("prompt plus max_new_tokens ({}) exceeds this generator's {} tokens", total,
                    pages_.num_pages() * page_size_));
  struct Release {
    PageAllocator& a;
    std::vector<int32_t>& p;
    ~Release() { a.release(p); }
  } release{pages_, pages};

  Rng rng(req.sampling.seed);
  GenerateResult out;
  auto step = [&](ForwardMode mode, int64_t start, std::vector<int32_t> toks) {
    SequenceChunk ch{&pages, start, std::move(toks), false};
    ForwardBatch fb = build_forward_batch(mode, {ch}, page_size_, model_.device());
    Workspace ws(model_.device());
    ForwardResult r = model_.forward(ws, fb, *cache_);
    return to_float_vector(r.logits);  // [V]
  };
  // Prefill, in chunks if asked (each chunk attends to the cache the previous ones wrote).
  const int64_t P = static_cast<int64_t>(req.prompt.size());
  const int64_t chunk = req.prefill_chunk > 0 ? req.prefill_chunk : P;
  std::vector<float> logits;
  for (int64_t s = 0; s < P; s += chunk) {
    const int64_t e = std::min(P, s + chunk);
    logits = step(ForwardMode::kExtend, s, {req.prompt.begin() + s, req.prompt.begin() + e});
  }
  for (int64_t i = 0; i < req.max_new_tokens; ++i) {
    const int32_t tok = sample_token(logits.data(), V, req.sampling, rng);
    out.tokens.push_back(tok);
    out.logits.push_back(logits);
    if (std::find(req.stop_ids.begin(), req.stop_ids.end(), tok) != req.stop_ids.end()) {
      out.stopped = true;
      break;
    }
    if (on_token && !on_token(tok)) break;
    if (i + 1 == req.max_new_tokens) break;
    logits = step(ForwardMode::kDecode, P + i, {tok});
  }
  return out;
}

}  // namespace tandem
