#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "bench_client/dataset.h"
#include "core/error.h"

namespace tandem::bench {
namespace {

// Byte-level, no merges: one token per byte, so token counts are character counts.
Tokenizer byte_tokenizer() {
  return Tokenizer::from_json(make_byte_level_tokenizer_json({"<|endoftext|>"}));
}

TEST(Lengths, RangeRatioZeroIsUniformFromOne) {
  Rng rng(1);
  const auto v = sample_lengths(8, 0.0, 40000, rng);
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 1);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 8);
  const double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  EXPECT_NEAR(m, 4.5, 0.05);
  for (int64_t x = 1; x <= 8; ++x) {  // every value about 1/8 of the time
    const double share =
        static_cast<double>(std::count(v.begin(), v.end(), x)) / static_cast<double>(v.size());
    EXPECT_NEAR(share, 0.125, 0.01) << x;
  }
}

TEST(Lengths, RangeRatioOneIsFixed) {
  Rng rng(1);
  for (int64_t x : sample_lengths(1024, 1.0, 1000, rng)) EXPECT_EQ(x, 1024);
}

TEST(Lengths, IntermediateRatiosTruncateLikePythonInt) {
  Rng rng(3);
  const auto half = sample_lengths(10, 0.5, 5000, rng);
  EXPECT_EQ(*std::min_element(half.begin(), half.end()), 5);
  EXPECT_EQ(*std::max_element(half.begin(), half.end()), 10);
  const auto quarter = sample_lengths(10, 0.25, 5000, rng);  // int(2.5) = 2
  EXPECT_EQ(*std::min_element(quarter.begin(), quarter.end()), 2);
  for (int64_t x : sample_lengths(1, 0.0, 10, rng)) EXPECT_EQ(x, 1);
  EXPECT_THROW(sample_lengths(10, 1.5, 1, rng), InvalidArgument);
  EXPECT_THROW(sample_lengths(0, 0.5, 1, rng), InvalidArgument);
}

TEST(Dataset, TextWindowsHaveExactLengthsAndTileAShortCorpus) {
  const Tokenizer tok = byte_tokenizer();
  const std::string corpus = "abcdefghij";  // 10 tokens; windows of 25 wrap round it
  DatasetSpec spec;
  spec.num_prompts = 50;
  spec.input_len = 25;
  spec.output_len = 7;
  spec.range_ratio = 1.0;
  const auto rows = random_text_dataset(tok, corpus, spec);
  ASSERT_EQ(rows.size(), 50u);
  std::set<char> firsts;
  for (const auto& r : rows) {
    EXPECT_EQ(r.prompt_len, 25);
    EXPECT_EQ(r.output_len, 7);
    ASSERT_EQ(r.prompt.size(), 25u);
    EXPECT_EQ(tok.encode(r.prompt).size(), 25u);
    const size_t start = static_cast<size_t>(r.prompt[0] - 'a');
    for (size_t j = 0; j < 25; ++j) EXPECT_EQ(r.prompt[j], corpus[(start + j) % 10]);
    firsts.insert(r.prompt[0]);
  }
  EXPECT_GT(firsts.size(), 5u);  // windows start at random places
  // Same seed, same dataset; another seed, another.
  EXPECT_EQ(random_text_dataset(tok, corpus, spec)[7].prompt, rows[7].prompt);
  spec.seed = 2;
  const auto other = random_text_dataset(tok, corpus, spec);
  bool differs = false;
  for (size_t i = 0; i < rows.size(); ++i) differs = differs || other[i].prompt != rows[i].prompt;
  EXPECT_TRUE(differs);
}

TEST(Dataset, RandomLengthsFollowTheRangeRatio) {
  const Tokenizer tok = byte_tokenizer();
  DatasetSpec spec;
  spec.num_prompts = 200;
  spec.input_len = 40;
  spec.output_len = 30;
  spec.range_ratio = 0.0;
  const auto rows = random_text_dataset(tok, "It is a truth universally acknowledged.", spec);
  int64_t min_in = 1 << 30, max_in = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(static_cast<int64_t>(r.prompt.size()), r.prompt_len);
    EXPECT_GE(r.output_len, 1);
    EXPECT_LE(r.output_len, 30);
    min_in = std::min(min_in, r.prompt_len);
    max_in = std::max(max_in, r.prompt_len);
  }
  EXPECT_LE(min_in, 4);
  EXPECT_GE(max_in, 36);
}

TEST(Dataset, RandomIdsFollowSglangsFormula) {
  const Tokenizer tok = byte_tokenizer();
  const int64_t vocab = tok.vocab_size();
  ASSERT_EQ(vocab, 257);
  DatasetSpec spec;
  spec.num_prompts = 5;
  spec.input_len = 6;
  spec.output_len = 4;
  spec.range_ratio = 1.0;
  const auto rows = random_ids_dataset(tok, spec);
  for (size_t i = 0; i < rows.size(); ++i) {
    bool found = false;  // some offset gives ids (offset + i + j) % vocab
    for (int64_t off = 0; off < vocab && !found; ++off) {
      std::vector<int32_t> ids;
      for (int64_t j = 0; j < 6; ++j)
        ids.push_back(static_cast<int32_t>((off + static_cast<int64_t>(i) + j) % vocab));
      found = tok.decode(ids) == rows[i].prompt;
    }
    EXPECT_TRUE(found) << i;
    EXPECT_EQ(rows[i].prompt_len, 6);
  }
}

TEST(Dataset, TokenizePromptKeepsTheSampledIds) {
  const Tokenizer tok = byte_tokenizer();
  DatasetSpec spec;
  spec.num_prompts = 9;
  spec.input_len = 12;
  spec.output_len = 3;
  spec.range_ratio = 0.5;  // lengths 6..12: each row's ids must match its own length
  EXPECT_TRUE(random_ids_dataset(tok, spec)[0].prompt_ids.empty());  // off by default
  spec.tokenize_prompt = true;
  for (const auto& rows : {random_ids_dataset(tok, spec),
                           random_text_dataset(tok, "Call me Ishmael. Some years ago.", spec)}) {
    for (const auto& r : rows) {
      ASSERT_EQ(static_cast<int64_t>(r.prompt_ids.size()), r.prompt_len);
      EXPECT_EQ(tok.decode(r.prompt_ids), r.prompt);  // the ids of the very text kept beside them
    }
  }
}

TEST(Arrivals, PoissonGapsHaveMeanOneOverRate) {
  Rng rng(1);
  const auto t = arrival_times(40001, 4.0, rng);
  EXPECT_EQ(t[0], 0.0);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  const double mean_gap = t.back() / 40000.0;
  EXPECT_NEAR(mean_gap, 0.25, 0.25 * 0.02);
  // Exponential: the standard deviation of the gaps equals their mean.
  double ss = 0;
  for (size_t i = 1; i < t.size(); ++i)
    ss += (t[i] - t[i - 1] - mean_gap) * (t[i] - t[i - 1] - mean_gap);
  EXPECT_NEAR(std::sqrt(ss / 40000.0), 0.25, 0.25 * 0.03);
}

TEST(Arrivals, InfiniteRateSendsEverythingAtOnce) {
  Rng rng(1);
  for (double x : arrival_times(10, INFINITY, rng)) EXPECT_EQ(x, 0.0);
  EXPECT_THROW(arrival_times(10, 0.0, rng), InvalidArgument);
}

TEST(Uniform, CoversBothEnds) {
  Rng rng(5);
  int lo = 0, hi = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t x = uniform_int(rng, 3, 5);
    ASSERT_GE(x, 3);
    ASSERT_LE(x, 5);
    lo += x == 3;
    hi += x == 5;
  }
  EXPECT_GT(lo, 250);
  EXPECT_GT(hi, 250);
}

}  // namespace
}  // namespace tandem::bench
