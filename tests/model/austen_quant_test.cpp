// The shipped default model quantized the way the released checkpoints are (make-checkpoint
// --from: GLM-5.x-FP8's 128x128 block FP8, W8A8 with ue8m0 activation scales; AMD Quark's MXFP4
// experts, W4A4) keeps its held-out perplexity within 3% and its MTP accept length no more than
// 0.1 below bf16 (issue #14). The numbers printed here are the model card's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "model/quantize_checkpoint.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

// Mean next-token negative log-likelihood over held-out texts (each its own sequence, at most
// `window` tokens, as the training run evaluated), in doubles.
double heldout_nll(Harness& h, const std::vector<std::vector<int32_t>>& texts, int64_t* count) {
  const int64_t V = h.model->config().vocab_size;
  double nll = 0;
  *count = 0;
  for (const auto& ids : texts) {
    const auto pages = h.pages_for(static_cast<int64_t>(ids.size()));
    ForwardResult r = h.run(ForwardMode::kExtend, pages, 0, ids, true);
    const auto logits = to_float_vector(r.logits);  // [n, V]
    for (size_t t = 0; t + 1 < ids.size(); ++t) {
      const float* row = logits.data() + t * V;
      double mx = row[0], sum = 0;
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double{row[v]});
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
      nll += std::log(sum) + mx - row[ids[t + 1]];
      ++*count;
    }
  }
  return nll / static_cast<double>(*count);
}

// Greedy accept length with S = 3 over the held-out prompts the bf16 test uses.
double accept_length(const std::string& dir, const std::vector<std::vector<int32_t>>& prompts) {
  LoadOptions lo;
  lo.show_progress = false;
  std::shared_ptr<const Model> model(Model::load(dir, lo));
  EngineOptions o;
  o.spec.algorithm = "EAGLE";
  o.spec.num_steps = 3;
  o.spec.num_draft_tokens = 4;
  o.spec.adaptive = false;  // accept lengths of S = 3 rounds, compared across weights
  Engine e(model, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_new_tokens = 96;
    streams.push_back(e.submit(r));
  }
  for (auto& s : streams) {
    RequestOutput out;
    do EXPECT_TRUE(s->next(out, std::chrono::seconds(120)));
    while (!out.finished);
  }
  return e.metrics().avg_spec_accept_length();
}

TEST(AustenQuantized, KeepsPerplexityAndAcceptLength) {
  const std::string bf16 = source_path("models/tandem-austen");
  const fs::path tmp =
      fs::temp_directory_path() / ("tandem_austen_quant_" + std::to_string(::getpid()));
  std::map<std::string, std::string> dirs = {{"bf16", bf16}};
  for (const std::string q : {"fp8", "mxfp4"}) {
    dirs[q] = (tmp / q).string();
    quantize_checkpoint(bf16, dirs[q], q);
  }
  const Tokenizer tok = Tokenizer::from_file(bf16 + "/tokenizer.json");
  std::ifstream tin(source_path("tests/data/austen/heldout_prompts_64.json"));
  std::vector<std::vector<int32_t>> texts;
  int64_t tokens = 0;
  for (const std::string& s : nlohmann::json::parse(tin).get<std::vector<std::string>>()) {
    std::vector<int32_t> ids = tok.encode(s);
    if (ids.size() > 256) ids.resize(256);  // the training run's evaluation window
    tokens += static_cast<int64_t>(ids.size());
    texts.push_back(std::move(ids));
  }
  std::ifstream pin(source_path("tests/data/austen/heldout_prompt_ids.json"));
  const auto prompts = nlohmann::json::parse(pin).get<std::vector<std::vector<int32_t>>>();
  std::map<std::string, double> ppl, acc;
  for (const auto& [fmt, dir] : dirs) {
    Harness h(dir, tokens + 64 * 16, 16, true);
    int64_t n = 0;
    ppl[fmt] = std::exp(heldout_nll(h, texts, &n));
    acc[fmt] = accept_length(dir, prompts);
    std::printf(
        "  %-5s held-out perplexity %.3f over %lld tokens (%+.2f%%), accept length %.4f (%+.4f)\n",
        fmt.c_str(), ppl[fmt], static_cast<long long>(n), 100.0 * (ppl[fmt] / ppl["bf16"] - 1.0),
        acc[fmt], acc[fmt] - acc["bf16"]);
  }
  fs::remove_all(tmp);
  for (const std::string q : {"fp8", "mxfp4"}) {
    EXPECT_LT(ppl[q] / ppl["bf16"], 1.03) << q;
    EXPECT_NE(ppl[q], ppl["bf16"]) << q << ": the quantized weights were not used";
    // Speculation must not lose by the quantization: at most 0.1 below bf16. Above is not a
    // loss (the FP8 copy measured +0.1002 over these 16 prompts, about this measurement's noise).
    EXPECT_GE(acc[q] - acc["bf16"], -0.1) << q;
    EXPECT_NE(acc[q], acc["bf16"]) << q << ": the quantized draft and target were not used";
  }
}

}  // namespace
}  // namespace tandem::test
