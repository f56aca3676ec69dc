// The process's hash seed (fraglab/seeded_hash.hpp).
#include "fraglab/seeded_hash.hpp"

#include <sys/random.h>

#include <random>

namespace fraglab {

namespace {

std::uint64_t draw_seed() {
  std::uint64_t seed = 0;
  if (::getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
    std::random_device device;  // getrandom unavailable (an old kernel): the library's source
    seed = (std::uint64_t{device()} << 32) ^ device();
  }
  return seed;
}

}  // namespace

std::uint64_t hash_seed() {
  static const std::uint64_t seed = draw_seed();
  return seed;
}

}  // namespace fraglab
