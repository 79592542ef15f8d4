// The shipped default model (models/tandem-austen) against golden outputs of the framework that
// trained it (python/train_austen.py, fp32 on the stored bf16 weights): logits past index_topk,
// the argmax at every position, MTP draft logits, and a greedy continuation.
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace tandem::test {
namespace {

std::vector<int32_t> ints(const SafetensorsFile& f, const std::string& n) {
  return to_int_vector(f.tensor(n));
}

TEST(AustenModel, MatchesTheTrainingFramework) {
  auto gold = SafetensorsFile::open(source_path("tests/data/austen/golden.safetensors"));
  Harness h(source_path("models/tandem-austen"), 4096, 16, true);
  const ModelConfig& c = h.model->config();
  EXPECT_EQ(c.arch, Arch::kGlmMoeDsa);
  const int64_t V = c.vocab_size;
  for (int p = 0; gold->has("prompt_" + std::to_string(p)); ++p) {
    const std::string s = std::to_string(p);
    const auto prompt = ints(*gold, "prompt_" + s);
    const int64_t n = static_cast<int64_t>(prompt.size());
    ASSERT_GT(n, c.index_topk);  // the indexer selects for the last rows
    auto pages = h.pages_for(n);
    ForwardResult r = h.run(ForwardMode::kExtend, pages, 0, prompt, true);
    const auto logits = to_float_vector(r.logits);
    // Argmax at every position.
    std::vector<int32_t> am;
    for (int64_t t = 0; t < n; ++t)
      am.push_back(static_cast<int32_t>(
          std::max_element(logits.begin() + t * V, logits.begin() + (t + 1) * V) -
          (logits.begin() + t * V)));
    EXPECT_EQ(am, ints(*gold, "argmax_" + s)) << "prompt " << p;
    const std::vector<float> tail(logits.begin() + (n - 16) * V, logits.end());
    const double e = rel_err(tail, to_float_vector(gold->tensor("logits_" + s)));
    EXPECT_LT(e, 1e-4) << "prompt " << p;
    // MTP: rows n-17 .. n-2 of the draft over (h_i, x_{i+1}).
    std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
    SequenceChunk ch{&pages, 0, shifted, true};
    ForwardBatch fb = build_forward_batch(ForwardMode::kExtend, {ch}, h.page_size, Device::cpu());
    Workspace ws(Device::cpu());
    const auto m = to_float_vector(
        h.model->forward_mtp(ws, fb, r.hidden.narrow(0, 0, n - 1).contiguous(), *h.cache).logits);
    const std::vector<float> mtail(m.begin() + (n - 17) * V, m.end());
    const double em = rel_err(mtail, to_float_vector(gold->tensor("mtp_logits_" + s)));
    EXPECT_LT(em, 1e-4) << "prompt " << p;
    std::printf("  austen prompt %d: logits rel err %.2e, MTP %.2e\n", p, e, em);
    // Greedy continuation through the paged cache.
    GenerateRequest req;
    req.prompt = prompt;
    req.max_new_tokens = gold->tensor("greedy_" + s).numel();
    Generator g(*h.model, 256, 16);
    EXPECT_EQ(g.generate(req).tokens, ints(*gold, "greedy_" + s)) << "prompt " << p;
  }
}

}  // namespace
}  // namespace tandem::test

namespace tandem::test {
namespace {

// Acceptance of the shipped model's MTP head on held-out Austen text (tests/data/austen, from
// python/austen_heldout.py), measured by the engine, against the independent count of the
// training framework on the same prompts (python/austen_accept.py, recorded in
// accept_length_torch.json).
TEST(AustenModel, AcceptLengthOnHeldOutTextMatchesTheIndependentCount) {
  std::ifstream in(source_path("tests/data/austen/heldout_prompt_ids.json"));
  const auto prompts = nlohmann::json::parse(in).get<std::vector<std::vector<int32_t>>>();
  std::ifstream ref_in(source_path("tests/data/austen/accept_length_torch.json"));
  const auto ref = nlohmann::json::parse(ref_in);
  init_backends();
  LoadOptions lo;
  lo.show_progress = false;
  std::shared_ptr<const Model> model(Model::load(source_path("models/tandem-austen"), lo));
  EngineOptions o;
  o.spec.algorithm = "EAGLE";
  o.spec.num_steps = ref["steps"].get<int64_t>();
  o.spec.num_draft_tokens = o.spec.num_steps + 1;
  Engine e(model, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_new_tokens = ref["new_tokens"].get<int64_t>();
    streams.push_back(e.submit(r));
  }
  for (auto& s : streams) {
    RequestOutput out;
    do ASSERT_TRUE(s->next(out, std::chrono::seconds(60)));
    while (!out.finished);
  }
  const EngineMetrics m = e.metrics();
  const double acc = m.avg_spec_accept_length(), want = ref["accept_length"].get<double>();
  std::printf(
      "  held-out accept length (S=%lld): engine %.4f over %llu rounds, training framework %.4f\n",
      static_cast<long long>(o.spec.num_steps), acc,
      static_cast<unsigned long long>(m.spec_verify_steps), want);
  EXPECT_GE(acc, 2.0);
  EXPECT_NEAR(acc, want, 0.02);
}

}  // namespace
}  // namespace tandem::test
