#include "bench_client/dataset.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace tandem::bench {

int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi) {
  TD_CHECK(lo <= hi, "empty range [{}, {}]", lo, hi);
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(rng());  // the full 64-bit range
  // Rejection keeps every value equally likely (no modulo bias).
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % span;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return lo + static_cast<int64_t>(x % span);
}

double exponential(Rng& rng, double mean) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
  return -mean * std::log1p(-u);
}

std::vector<int64_t> sample_lengths(int64_t full_len, double range_ratio, int64_t n, Rng& rng) {
  if (full_len < 1) throw InvalidArgument(fmt::format("length must be >= 1, got {}", full_len));
  if (range_ratio < 0 || range_ratio > 1)
    throw InvalidArgument(
        fmt::format("--random-range-ratio must be in [0, 1], got {}", range_ratio));
  // int() in Python truncates toward zero; the product is non-negative here.
  const int64_t lo =
      std::max<int64_t>(static_cast<int64_t>(static_cast<double>(full_len) * range_ratio), 1);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = uniform_int(rng, std::min(lo, full_len), full_len);
  return out;
}

std::vector<DatasetRow> random_text_dataset(const Tokenizer& tok, const std::string& corpus,
                                            const DatasetSpec& spec) {
  Rng rng(spec.seed);
  const auto in = sample_lengths(spec.input_len, spec.range_ratio, spec.num_prompts, rng);
  const auto out = sample_lengths(spec.output_len, spec.range_ratio, spec.num_prompts, rng);
  const std::vector<int32_t> ids = tok.encode(corpus);
  if (ids.empty()) throw InvalidArgument("the prompt corpus is empty");
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  std::vector<DatasetRow> rows(static_cast<size_t>(spec.num_prompts));
  std::vector<int32_t> window;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t start = uniform_int(rng, 0, n_ids - 1);
    window.resize(static_cast<size_t>(in[i]));
    for (int64_t j = 0; j < in[i]; ++j)
      window[static_cast<size_t>(j)] = ids[static_cast<size_t>((start + j) % n_ids)];
    rows[i] = {tok.decode(window), in[i], out[i], {}};
    if (spec.tokenize_prompt) rows[i].prompt_ids = window;
  }
  return rows;
}

std::vector<DatasetRow> random_ids_dataset(const Tokenizer& tok, const DatasetSpec& spec) {
  Rng rng(spec.seed);
  const auto in = sample_lengths(spec.input_len, spec.range_ratio, spec.num_prompts, rng);
  const auto out = sample_lengths(spec.output_len, spec.range_ratio, spec.num_prompts, rng);
  const int64_t vocab = tok.vocab_size();
  if (vocab < 1) throw InvalidArgument("the tokenizer has an empty vocabulary");
  std::vector<DatasetRow> rows(static_cast<size_t>(spec.num_prompts));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t offset = uniform_int(rng, 0, vocab - 1);
    ids.resize(static_cast<size_t>(in[i]));
    for (int64_t j = 0; j < in[i]; ++j)
      ids[static_cast<size_t>(j)] =
          static_cast<int32_t>((offset + static_cast<int64_t>(i) + j) % vocab);
    rows[i] = {tok.decode(ids), in[i], out[i], {}};
    if (spec.tokenize_prompt) rows[i].prompt_ids = ids;
  }
  return rows;
}

Rng arrival_rng(uint64_t seed) {
  return Rng(seed ^ 0x9e3779b97f4a7c15ull);
}

std::vector<double> arrival_times(int64_t n, double request_rate, Rng& rng) {
  if (!(request_rate > 0))
    throw InvalidArgument(fmt::format("--request-rate must be > 0, got {}", request_rate));
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  if (std::isinf(request_rate)) return t;
  for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] + exponential(rng, 1.0 / request_rate);
  return t;
}

}  // namespace tandem::bench
