// A small seeded generator (splitmix64) with its own conversions, shared by the workload
// generator, tests and benchmarks, so the same seed gives the same numbers on
// every standard library (std::*_distribution are implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>

namespace fraglab {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  // Independent stream for a (seed, purpose, index) triple, e.g. (seed, rank, step).
  static Rng derive(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) {
    Rng r(seed ^ 0x9e3779b97f4a7c15ull);
    r.state_ ^= r.next() + a * 0xbf58476d1ce4e5b9ull;
    r.state_ ^= r.next() + b * 0x94d049bb133111ebull;
    return r;
  }

  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (modulo bias is negligible for the small n of tests and benchmarks).
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller; one value per call keeps the stream simple).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace fraglab
