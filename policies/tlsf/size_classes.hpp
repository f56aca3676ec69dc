// TLSF's two-level size classes (Masmano, Ripoll, Crespo, Real: "TLSF: a New Dynamic Memory
// Allocator for Real-Time Systems", ECRTS 2004, §4 "mapping_insert" / "mapping_search").
//
// A size is filed under (fl, sl): fl = floor(log2(size)) picks the power-of-two range
// [2^fl, 2^(fl+1)); sl picks one of 2^sl_bits equal slices of it, each 2^(fl - sl_bits) bytes
// wide. Every block in class (fl, sl) has a size in [class_floor, class_floor + slice).
//
// A request is looked up from the class *above* the one its size falls in, unless the size is a
// class floor (the paper's good fit: size + slice - 1, then the same mapping). Every block found
// from there on is large enough, so a lookup never walks a list; the price is that a block in
// the request's own class that would have fitted is not seen.
//
// Precondition: size >= 2^sl_bits, so that fl >= sl_bits. Here every size is a multiple of 512
// (2^9) and sl_bits <= kMaxSlBits (6), so it always holds.
#pragma once

#include <bit>
#include <cstdint>

#include "fraglab/types.hpp"

namespace fraglab::tlsf {

inline constexpr unsigned kMaxSlBits = 6;     // second-level bitmap fits one 64-bit word
inline constexpr unsigned kFirstLevels = 64;  // fl of any 64-bit size

struct SizeClass {
  unsigned fl = 0;
  unsigned sl = 0;
  bool operator==(const SizeClass&) const = default;
};

// mapping_insert: the class a free block of `size` bytes is filed under (rounds down).
constexpr SizeClass class_of(Bytes size, unsigned sl_bits) {
  const unsigned fl = static_cast<unsigned>(std::bit_width(size)) - 1;
  const Bytes top_bits = size >> (fl - sl_bits);  // in [2^sl_bits, 2^(sl_bits+1))
  return SizeClass{fl, static_cast<unsigned>(top_bits - (Bytes{1} << sl_bits))};
}

// mapping_search: the lowest class whose every block holds `size` bytes (rounds up).
// `size` must stay below 2^63 so the rounding cannot overflow.
constexpr SizeClass class_for_request(Bytes size, unsigned sl_bits) {
  const unsigned fl = static_cast<unsigned>(std::bit_width(size)) - 1;
  return class_of(size + (Bytes{1} << (fl - sl_bits)) - 1, sl_bits);
}

// The smallest size filed under class c.
constexpr Bytes class_floor(SizeClass c, unsigned sl_bits) {
  return (Bytes{1} << c.fl) + (Bytes{c.sl} << (c.fl - sl_bits));
}

}  // namespace fraglab::tlsf
