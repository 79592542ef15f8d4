// bench_serving's `random` and `random-ids` datasets: prompt and output lengths drawn uniformly,
// prompts of exactly the drawn number of tokens.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench_client/types.h"
#include "tokenizer/tokenizer.h"

namespace tandem::bench {

// One generator for everything the seed decides (lengths, prompt windows), so a seed names a
// dataset. std::mt19937_64 is fully specified by the standard; the distributions below are
// written out by hand so that the dataset is the same whichever standard library built it.
using Rng = std::mt19937_64;

// Uniform integer in [lo, hi].
int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi);
// Exponential with the given mean.
double exponential(Rng& rng, double mean);

// SGLang's lengths: uniform on [max(int(full_len * range_ratio), 1), full_len]. So the default
// ratio 0 gives [1, L] (mean about L/2) and ratio 1 gives exactly L.
std::vector<int64_t> sample_lengths(int64_t full_len, double range_ratio, int64_t n, Rng& rng);

struct DatasetSpec {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  double range_ratio = 0.0;
  uint64_t seed = 1;
  // SGLang's --tokenize-prompt: each row keeps its token ids (DatasetRow::prompt_ids), which are
  // sent instead of the text. The text of a window of ids re-tokenizes to a different count.
  bool tokenize_prompt = false;
};

// `random`: real text. The corpus is tokenized once; prompt i is the window of input_len[i]
// tokens starting at a random token of the corpus (wrapping round to its start, so a corpus
// shorter than the window is tiled), decoded back to text. Random starts keep prompts from
// sharing prefixes, which a prefix cache would otherwise turn into free prefill.
std::vector<DatasetRow> random_text_dataset(const Tokenizer& tok, const std::string& corpus,
                                            const DatasetSpec& spec);

// `random-ids`: token ids (offset_i + i + j) % vocab_size with a random offset per prompt, as
// SGLang's; decoded to text.
std::vector<DatasetRow> random_ids_dataset(const Tokenizer& tok, const DatasetSpec& spec);

// The generator for arrival times: a stream of its own, so that with one seed a request's gap
// is not drawn from the same numbers as its lengths.
Rng arrival_rng(uint64_t seed);

// Arrival times of n requests: all 0 for an infinite rate, else a Poisson process (exponential
// gaps of mean 1/rate), the first at 0.
std::vector<double> arrival_times(int64_t n, double request_rate, Rng& rng);

}  // namespace tandem::bench
