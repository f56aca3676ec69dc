// Rounding (allocator-model §1.2-§1.5). Written from the spec's description; see rounding.hpp.
#include "pytorch/rounding.hpp"

#include <algorithm>
#include <bit>

namespace fraglab::cca {

Bytes roundup_power2_next_division(Bytes size, Bytes divisions, Version version) {
  if (version < Version::V2_0 && (size <= 4 || divisions <= 1)) return size;  // 1.13 guard (§1.3)
  if (std::has_single_bit(size)) return size;
  const Bytes floor2 = std::bit_floor(size);
  const int shift = 63 - std::countl_zero(divisions == 0 ? Bytes{1} : divisions);
  const Bytes step = floor2 >> shift;
  if (step == 0) return floor2 << 1;
  const Bytes down = size & ~(step - 1);
  return down == size ? size : down + step;
}

}  // namespace fraglab::cca
