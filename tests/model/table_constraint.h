// A token-level automaton that stands in for a grammar in the runtime's tests of constrained
// decoding (the grammar engine has its own tests in tests/grammar).
#pragma once

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/token_constraint.h"

namespace tandem::test {

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Token t may follow a history of n tokens ending in `last` when a hash of (n mod 4, last mod 7,
// t) lands in the lower `percent`: a context-dependent set, like a grammar's. The output may end
// after min_len tokens and must end after max_len.
class TableConstraint final : public TokenConstraint {
 public:
  TableConstraint(uint64_t salt, int percent, int64_t min_len, int64_t max_len)
      : salt_(salt), percent_(percent), min_len_(min_len), max_len_(max_len) {}
  bool allows(int64_t n, int32_t last, int32_t t) const {
    if (n >= max_len_) return false;
    const uint64_t h =
        mix(salt_ ^ mix((static_cast<uint64_t>(n % 4) << 40) ^
                        (static_cast<uint64_t>(last % 7) << 32) ^ static_cast<uint64_t>(t)));
    return static_cast<int>(h % 100) < percent_;
  }
  void fill_mask(uint32_t* bits, int64_t vocab) override {
    const int64_t n = static_cast<int64_t>(hist_.size());
    const int32_t last = hist_.empty() ? 0 : hist_.back();
    for (int32_t t = 0; t < vocab; ++t)
      if (allows(n, last, t)) bits[t >> 5] |= 1u << (t & 31);
  }
  bool accept(int32_t t) override {
    if (!allows(static_cast<int64_t>(hist_.size()), hist_.empty() ? 0 : hist_.back(), t))
      return false;
    hist_.push_back(t);
    return true;
  }
  void rollback(int64_t n) override { hist_.resize(hist_.size() - static_cast<size_t>(n)); }
  bool can_terminate() const override { return static_cast<int64_t>(hist_.size()) >= min_len_; }
  bool is_terminated() const override { return static_cast<int64_t>(hist_.size()) >= max_len_; }
  const std::vector<int32_t>& history() const { return hist_; }
  // "salt percent min_len max_len": what parse() rebuilds a fresh copy from.
  std::string replica_spec() const override {
    return std::to_string(salt_) + " " + std::to_string(percent_) + " " + std::to_string(min_len_) +
           " " + std::to_string(max_len_);
  }
  static std::shared_ptr<TokenConstraint> parse(const std::string& spec) {
    std::istringstream in(spec);
    uint64_t salt = 0;
    int percent = 0;
    int64_t lo = 0, hi = 0;
    in >> salt >> percent >> lo >> hi;
    return std::make_shared<TableConstraint>(salt, percent, lo, hi);
  }

 private:
  uint64_t salt_;
  int percent_;
  int64_t min_len_, max_len_;
  std::vector<int32_t> hist_;
};

}  // namespace tandem::test
