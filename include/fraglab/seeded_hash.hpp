// Hashing that an input cannot aim at. Every hash table keyed by values read from an input
// (allocation ids, addresses, strings of a trace) hashes them through this, so that a file whose
// keys were chosen to land in one slot (hash flooding: ids that are multiples of the inverse of a
// fixed multiplier, strings that collide under a fixed-seed hash) costs what ordinary keys cost,
// instead of a probe through every earlier key per lookup (quadratic time).
//
// The seed is random, drawn once per process (getrandom, else std::random_device), so no file can
// be built against it. Nothing fraglab prints may depend on it: a table hashed this way is only
// ever looked up, never iterated into an output (or its entries are sorted first), so the same
// input still gives the same bytes out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace fraglab {

// The process's random seed (never changes once read; thread-safe).
std::uint64_t hash_seed();

// murmur3's 64-bit finaliser: a bijection in which every input bit flips each output bit with
// probability about 1/2.
constexpr std::uint64_t fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// A 64-bit key under `seed`: all 64 result bits are usable (a table may take the high or the low
// bits). Tables on the hot path keep hash_seed() in a member and call this.
constexpr std::uint64_t seeded_hash(std::uint64_t key, std::uint64_t seed) { return fmix64(key ^ seed); }

// Bytes under `seed`: each 8-byte block goes through the full finaliser before the next is mixed
// in (h = fmix64(h ^ block)), starting from the seed and the length, so a difference an input
// puts in one block reaches the state only through the unknown seed (unlike murmur's block
// function, whose seed-independent differentials allow collisions for every seed).
inline std::uint64_t seeded_hash(std::string_view bytes, std::uint64_t seed) {
  std::uint64_t h = fmix64(seed ^ (bytes.size() * 0x9E3779B97F4A7C15ull));
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t block;
    std::memcpy(&block, p, 8);
    h = fmix64(h ^ block);
  }
  if (n > 0) {
    std::uint64_t block = 0;  // the length went into the start: zero padding is unambiguous
    std::memcpy(&block, p, n);
    h = fmix64(h ^ block);
  }
  return fmix64(h ^ seed);
}

// The hasher for std::unordered_map / std::unordered_set keyed by input values (integers of up
// to 64 bits, std::string, std::string_view; transparent: a map of std::string can be searched
// with a std::string_view).
struct SeededHash {
  using is_transparent = void;
  std::uint64_t seed = hash_seed();
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
  std::size_t operator()(Int key) const {
    return static_cast<std::size_t>(seeded_hash(static_cast<std::uint64_t>(key), seed));
  }
  std::size_t operator()(std::string_view s) const { return static_cast<std::size_t>(seeded_hash(s, seed)); }
  std::size_t operator()(const std::string& s) const { return (*this)(std::string_view(s)); }
  std::size_t operator()(const char* s) const { return (*this)(std::string_view(s)); }
};

}  // namespace fraglab
