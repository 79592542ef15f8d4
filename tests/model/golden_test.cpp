// The CPU engine against golden outputs of Hugging Face transformers (python/make_golden.py):
// logits at every prompt position, the final hidden states, a greedy continuation through the
// paged cache, and the MTP layer against the script's independent reference.
#include <filesystem>

#include "model/safetensors.h"
#include "model_test_util.h"
#include "runtime/generator.h"

namespace tandem::test {
namespace {

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return source_path("tests/data/golden/" + GetParam()); }
};

std::vector<int32_t> ints(const SafetensorsFile& f, const std::string& name) {
  Tensor t = f.tensor(name);
  return {t.data<int32_t>(), t.data<int32_t>() + t.numel()};
}
std::vector<float> floats(const SafetensorsFile& f, const std::string& name) {
  return to_float_vector(f.tensor(name));
}

// fp32 on both sides: the engine must agree with transformers far inside 1e-3.
constexpr double kTol = 1e-4;

TEST_P(Golden, PromptLogitsHiddenAndMtpMatchTransformers) {
  auto gold = SafetensorsFile::open(dir() + "/golden.safetensors");
  Harness h(dir(), 512);
  const int64_t V = h.model->config().vocab_size;
  for (int p = 0; gold->has("prompt_" + std::to_string(p)); ++p) {
    const auto prompt = ints(*gold, "prompt_" + std::to_string(p));
    const int64_t n = static_cast<int64_t>(prompt.size());
    auto pages = h.pages_for(n);
    ForwardResult r = h.run(ForwardMode::kExtend, pages, 0, prompt, /*all_logits=*/true);
    const auto logits = to_float_vector(r.logits);
    const auto want = floats(*gold, "logits_" + std::to_string(p));
    ASSERT_EQ(logits.size(), static_cast<size_t>(n * V));
    const double e = rel_err(logits, want);
    EXPECT_LT(e, kTol) << GetParam() << " prompt " << p << " (" << n << " tokens): logits rel err "
                       << e;
    std::printf("  %s prompt %d (%lld tokens): logits rel err %.2e\n", GetParam().c_str(), p,
                static_cast<long long>(n), e);
    EXPECT_LT(rel_err(to_float_vector(r.hidden), floats(*gold, "hidden_" + std::to_string(p))),
              kTol);
    // Per position too, so one bad row cannot hide in the average.
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> a(logits.begin() + t * V, logits.begin() + (t + 1) * V);
      std::vector<float> b(want.begin() + t * V, want.begin() + (t + 1) * V);
      EXPECT_LT(rel_err(a, b), kTol) << GetParam() << " prompt " << p << " position " << t;
    }

    // MTP: position i pairs token x_{i+1} with the main model's hidden h_i.
    if (!gold->has("mtp_logits_" + std::to_string(p))) continue;
    std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
    SequenceChunk ch{&pages, 0, shifted, true};
    ForwardBatch fb = build_forward_batch(ForwardMode::kExtend, {ch}, h.page_size, Device::cpu());
    Workspace ws(Device::cpu());
    Tensor hid = r.hidden.narrow(0, 0, n - 1).contiguous();
    ForwardResult m = h.model->forward_mtp(ws, fb, hid, *h.cache);
    const double em =
        rel_err(to_float_vector(m.logits), floats(*gold, "mtp_logits_" + std::to_string(p)));
    EXPECT_LT(em, kTol) << GetParam() << " prompt " << p << ": MTP logits rel err " << em;
    std::printf("  %s prompt %d: MTP logits rel err %.2e\n", GetParam().c_str(), p, em);
  }
}

TEST_P(Golden, GreedyContinuationThroughThePagedCacheMatches) {
  auto gold = SafetensorsFile::open(dir() + "/golden.safetensors");
  init_backends();
  LoadOptions lo;
  lo.load_mtp = false;
  lo.show_progress = false;
  auto model = Model::load(dir(), lo);
  for (int p = 0; gold->has("prompt_" + std::to_string(p)); ++p) {
    const auto want = ints(*gold, "greedy_" + std::to_string(p));
    GenerateRequest req;
    req.prompt = ints(*gold, "prompt_" + std::to_string(p));
    req.max_new_tokens = static_cast<int64_t>(want.size());
    Generator gen(*model, 128, /*page_size=*/4);  // small pages: sequences span many of them
    EXPECT_EQ(gen.generate(req).tokens, want) << GetParam() << " prompt " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Golden,
                         ::testing::Values("glm5.2", "glm5", "deepseek-v3.2", "deepseek-v3"),
                         [](const auto& info) { return test::test_name(info.param); });

}  // namespace
}  // namespace tandem::test
