// Portable deterministic randomness for zps_train. The standard distributions
// (std::normal_distribution, std::shuffle, ...) are implementation-defined, so two builds could
// disagree on a data split or an initial weight; these are pure functions of the seed on every
// platform and compiler.
//
// An Rng is a value owned by whoever draws from it; not thread-safe (give each thread its own).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zps::train {

inline uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Combines two words into a seed for an independent stream (e.g. seed and epoch).
inline uint64_t mixSeeds(uint64_t a, uint64_t b) { return splitMix64(splitMix64(a) ^ (b + 0x632BE59BD9B4E019ull)); }

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(splitMix64(seed)) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [0, n), n > 0 (multiply-shift; the bias is below 2^-64 * n).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  // Standard normal by Box-Muller (one value per call; the twin is dropped to keep the stream
  // simple).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// A seeded Fisher-Yates permutation of [0, n).
inline std::vector<size_t> seededPermutation(size_t n, uint64_t seed) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  Rng rng(seed);
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

}  // namespace zps::train
