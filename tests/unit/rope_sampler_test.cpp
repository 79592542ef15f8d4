#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model/presets.h"
#include "model/rope.h"
#include "runtime/sampler.h"

namespace tandem {
namespace {

TEST(Rope, DeepSeekYarnRampAndFactors) {
  // low = floor(cd(32)) = 10 and high = ceil(cd(1)) = 23 on DeepSeek's real configuration:
  // frequencies below 10 stay unscaled, above 23 are divided by 40.
  const ModelConfig c = preset_config("deepseek-v3");
  const RopeTables r = compute_rope_tables(c);
  ASSERT_EQ(r.inv_freq.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    const double base = std::pow(10000.0, -2.0 * i / 64);
    if (i <= 10) {
      EXPECT_NEAR(r.inv_freq[i], base, base * 1e-5) << i;
    }
    if (i >= 23) {
      EXPECT_NEAR(r.inv_freq[i], base / 40, base / 40 * 1e-5) << i;
    }
    if (i > 10 && i < 23) {
      const double ramp = (i - 10.0) / 13.0;
      EXPECT_NEAR(r.inv_freq[i], base / 40 * ramp + base * (1 - ramp), base * 1e-5) << i;
    }
  }
  EXPECT_FLOAT_EQ(r.attention_factor, 1.0f);  // mscale == mscale_all_dim
  const RopeTables g = compute_rope_tables(preset_config("glm5.2"));
  EXPECT_NEAR(g.inv_freq[1], std::pow(8e6, -2.0 / 64), 1e-6);
}

TEST(Sampler, GreedyTopKTopPAndSeeds) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  Rng rng(1);
  EXPECT_EQ(sample_token(logits.data(), 5, SamplingParams{}, rng), 1);  // lowest index of the tie
  std::vector<float> p;
  sampling_distribution(logits.data(), 5, SamplingParams{1.0f, 2, 1.0f, 0}, p);
  EXPECT_NEAR(p[1], 0.5, 1e-6);
  EXPECT_NEAR(p[3], 0.5, 1e-6);
  EXPECT_EQ(p[2], 0.0f);
  // top_p keeps the smallest prefix reaching the mass.
  sampling_distribution(logits.data(), 5, SamplingParams{1.0f, -1, 0.3f, 0}, p);
  EXPECT_GT(p[1], 0.99f);
  // A seed reproduces; frequencies follow the distribution.
  SamplingParams sp{0.7f, -1, 1.0f, 0};
  std::map<int, int> count;
  Rng a(7), b(7);
  for (int i = 0; i < 20000; ++i) {
    const int x = sample_token(logits.data(), 5, sp, a);
    EXPECT_EQ(x, sample_token(logits.data(), 5, sp, b));
    ++count[x];
  }
  sampling_distribution(logits.data(), 5, sp, p);
  for (int v = 0; v < 5; ++v) EXPECT_NEAR(count[v] / 20000.0, p[v], 0.015) << v;
}

}  // namespace
}  // namespace tandem
