// A small, portable RNG (splitmix64): a seed gives the same stream on every platform, which
// keeps sampling and random checkpoints reproducible.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : s_(seed) {}
  // The whole state: Rng(r.state()) continues r's stream exactly (a step message carries it).
  uint64_t state() const { return s_; }
  uint64_t next_u64() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {                                                               // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

}  // namespace tandem
