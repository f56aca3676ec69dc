// count_lines (line_count.hpp): 32 bytes a step with AVX2 where the processor has it (chosen at
// run time: the build targets baseline x86-64), else 16 with SSE2 (part of every x86-64), and the
// rest 8 bytes a step. Each byte lane counts the newlines it saw, summed every 255 steps before a
// lane could overflow. One memchr call per line cost more than a tenth of the whole JSONL parse,
// an 8-byte loop alone still ~15 % of it, and the SSE2 loop ~14 instructions per 55-byte line
// (4 % of the parse).
#include "trace/line_count.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FRAGLAB_LINE_COUNT_X86 1
#include <immintrin.h>
#endif

namespace fraglab::detail {

namespace {

#if defined(FRAGLAB_LINE_COUNT_X86)
// Newlines in the first multiple of 32 bytes of s; `done` is set to that multiple.
[[gnu::target("avx2")]] std::size_t newlines_avx2(std::string_view s, std::size_t& done) {
  const __m256i newline = _mm256_set1_epi8('\n');
  std::size_t n = 0, i = 0;
  while (s.size() - i >= 32) {
    const std::size_t steps = std::min<std::size_t>((s.size() - i) / 32, 255);
    __m256i lanes = _mm256_setzero_si256();
    std::size_t k = 0;
    // Four blocks a turn; each lane gains at most 4 per turn and 255 blocks at most: no lane
    // passes 255.
    for (; k + 4 <= steps; k += 4, i += 128) {
      const char* b = s.data() + i;
      const __m256i v0 = _mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), newline);
      const __m256i v1 = _mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32)), newline);
      const __m256i v2 = _mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64)), newline);
      const __m256i v3 = _mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 96)), newline);
      lanes =
          _mm256_sub_epi8(lanes, _mm256_add_epi8(_mm256_add_epi8(v0, v1), _mm256_add_epi8(v2, v3)));  // a match is -1
    }
    for (; k < steps; ++k, i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.data() + i));
      lanes = _mm256_sub_epi8(lanes, _mm256_cmpeq_epi8(v, newline));
    }
    const __m256i sums = _mm256_sad_epu8(lanes, _mm256_setzero_si256());  // four 16-bit sums
    n += static_cast<std::size_t>(_mm256_extract_epi64(sums, 0)) +
         static_cast<std::size_t>(_mm256_extract_epi64(sums, 1)) +
         static_cast<std::size_t>(_mm256_extract_epi64(sums, 2)) +
         static_cast<std::size_t>(_mm256_extract_epi64(sums, 3));
  }
  done = i;
  return n;
}

bool has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}
#endif

}  // namespace

std::size_t count_lines(std::string_view s) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ull, kLow7 = 0x7F7F7F7F7F7F7F7Full;
  std::size_t n = 1, i = 0;
#if defined(FRAGLAB_LINE_COUNT_X86)
  if (has_avx2()) n += newlines_avx2(s, i);
  const __m128i newline = _mm_set1_epi8('\n');
  while (s.size() - i >= 16) {
    const std::size_t steps = std::min<std::size_t>((s.size() - i) / 16, 255);
    __m128i lanes = _mm_setzero_si128();
    std::size_t k = 0;
    // Four blocks a turn: the loop's own count, compare and branch were a third of its work.
    for (; k + 4 <= steps; k += 4, i += 64) {
      const char* b = s.data() + i;
      const __m128i v0 = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), newline);
      const __m128i v1 = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)), newline);
      const __m128i v2 = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 32)), newline);
      const __m128i v3 = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 48)), newline);
      // Each lane gains at most 4 per turn and 255 blocks at most: no lane passes 255.
      lanes = _mm_sub_epi8(lanes, _mm_add_epi8(_mm_add_epi8(v0, v1), _mm_add_epi8(v2, v3)));  // a match is -1
    }
    for (; k < steps; ++k, i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
      lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(v, newline));  // a match is -1
    }
    const __m128i sums = _mm_sad_epu8(lanes, _mm_setzero_si128());  // two 16-bit sums
    n += static_cast<std::size_t>(_mm_cvtsi128_si32(sums)) + static_cast<std::size_t>(_mm_extract_epi16(sums, 4));
  }
#endif
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    std::uint64_t x = v ^ (kOnes * '\n');  // a '\n' byte becomes 0
    // High bit set in every byte that is not zero (exact: no carries between bytes).
    std::uint64_t nonzero = ((x & kLow7) + kLow7) | x;
    // Sum the 0/1 flags with one multiply (std::popcount is a libgcc call on baseline x86-64).
    n += static_cast<std::size_t>((((~nonzero & (kOnes << 7)) >> 7) * kOnes) >> 56);
  }
  for (; i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

}  // namespace fraglab::detail
