// run_key_end (src/trace/pickle_internal.hpp) finds where the memo key of a run of GETs ends with
// SSE2, 64 and then 16 bytes at a time. Its rule is the one valid_get_run_end used with memchr:
// the first APPENDS byte in [q, limit) followed by SETITEMS or with no GET opcode byte among the
// four after it; none (nullptr) once the first APPENDS byte left is less than 5 bytes before the
// limit. The reference below is that rule written byte by byte, from its comment; the inputs put
// APPENDS bytes at every offset around the 16- and 64-byte block edges and near the limit, where
// the block loops and the tail loop hand over, and random runs of GETs are checked as well.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "trace/pickle_internal.hpp"

namespace fraglab::pickle::internal {
namespace {

const unsigned char* reference_key_end(const unsigned char* q, const unsigned char* limit) {
  for (; q < limit; ++q) {
    if (*q != 'e') continue;            // APPENDS
    if (limit - q < 5) return nullptr;  // the first one left is too near the limit
    if (q[1] == 'u') return q;          // followed by SETITEMS
    bool get_after = false;
    for (int k = 1; k <= 4; ++k) get_after = get_after || q[k] == 'h' || q[k] == 'j';  // BINGET, LONG_BINGET
    if (!get_after) return q;
  }
  return nullptr;
}

void expect_same(const std::vector<unsigned char>& bytes, std::size_t from, std::size_t limit,
                 const std::string& what) {
  const unsigned char* q = bytes.data() + from;
  const unsigned char* l = bytes.data() + limit;
  const unsigned char* want = reference_key_end(q, l);
  const unsigned char* got = run_key_end(q, l);
  ASSERT_EQ(got, want) << what << ": from " << from << " limit " << limit << " (want "
                       << (want ? want - bytes.data() : -1) << ", got " << (got ? got - bytes.data() : -1) << ")";
}

TEST(PickleRunKey, NoAppendsByteMeansNoEnd) {
  std::vector<unsigned char> bytes(300, 'h');
  for (std::size_t limit = 0; limit <= bytes.size(); ++limit) expect_same(bytes, 0, limit, "all BINGET bytes");
  EXPECT_EQ(run_key_end(bytes.data(), bytes.data() + bytes.size()), nullptr);
}

// One APPENDS byte at each offset, followed by SETITEMS (an end), by GET opcodes (not an end) or
// by other bytes (an end), with limits that cut it off at each distance.
TEST(PickleRunKey, OneAppendsByteAtEveryOffset) {
  const std::vector<std::string> afters = {"u....", "hhhh", "...j", "jjjj", "....", ".h..", "u"};
  for (std::size_t at = 0; at < 200; ++at) {
    for (const std::string& after : afters) {
      std::vector<unsigned char> bytes(at, 'h');
      bytes.push_back('e');
      bytes.insert(bytes.end(), after.begin(), after.end());
      bytes.resize(at + 80, 'j');
      for (std::size_t limit = at; limit <= std::min(bytes.size(), at + 8); ++limit)
        expect_same(bytes, 0, limit, "APPENDS then '" + after + "'");
      expect_same(bytes, 0, bytes.size(), "APPENDS then '" + after + "', whole");
    }
  }
}

// A first APPENDS byte that is not an end (GETs follow), then one that is, in the same and in
// later blocks: every candidate of a block is looked at, in order.
TEST(PickleRunKey, LaterCandidateInTheSameOrNextBlock) {
  for (std::size_t first = 0; first < 140; first += 3) {
    for (std::size_t gap = 1; gap < 80; gap += 7) {
      std::vector<unsigned char> bytes(first, 'h');
      bytes.insert(bytes.end(), {'e', 'h', 'h', 'h', 'h'});  // index byte 0x65: GETs follow
      bytes.resize(bytes.size() + gap, 'h');
      bytes.insert(bytes.end(), {'e', 'u', '}', 0x94, '('});  // APPENDS SETITEMS: the end
      bytes.resize(bytes.size() + 20, 'j');
      for (std::size_t from = 0; from < 3; ++from) expect_same(bytes, from, bytes.size(), "two candidates");
    }
  }
}

// Runs of BINGET and LONG_BINGET with random index bytes (which are APPENDS bytes now and then)
// ending in APPENDS and what a trace entry has after it.
TEST(PickleRunKey, RandomRunsOfGets) {
  std::mt19937 rng(18);
  for (int round = 0; round < 3000; ++round) {
    std::vector<unsigned char> bytes;
    const int gets = static_cast<int>(rng() % 120);
    for (int g = 0; g < gets; ++g) {
      if (rng() % 2) {
        bytes.push_back('h');
        bytes.push_back(static_cast<unsigned char>(rng()));
      } else {
        bytes.push_back('j');
        for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<unsigned char>(rng() % 4 ? 'e' : rng()));
      }
    }
    const std::size_t run = bytes.size();
    const char* tails[] = {"eu}\x94(j", "e]\x94(hh", "e", "eh", "u", ""};
    const std::string tail = tails[rng() % 6];
    bytes.insert(bytes.end(), tail.begin(), tail.end());
    const std::size_t extra = rng() % 8;
    for (std::size_t k = 0; k < extra; ++k) bytes.push_back(static_cast<unsigned char>(rng()));
    expect_same(bytes, 0, bytes.size(), "random run of " + std::to_string(gets) + " GETs");
    expect_same(bytes, 0, std::min(bytes.size(), run + 3), "random run, cut after it");
  }
}

}  // namespace
}  // namespace fraglab::pickle::internal
