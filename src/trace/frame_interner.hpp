// FrameInterner: builds a Trace's frame and stack tables (README "Stack frames") from the stacks a
// reader meets, one unique frame and one unique stack each, in the order first met.
//
// Invariants:
//  - equal frames (filename, line, name) get one index in Trace::frames; equal stacks (the same
//    frame indices in the same order) one index in Trace::stacks; indices are given in the order
//    first met, so the same input gives the same tables;
//  - a stack keeps at most `keep` frames, the innermost ones (the first of the recorded list);
//  - an empty stack is no stack: kNoString;
//  - frame text is valid UTF-8 (see frame()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fraglab/seeded_hash.hpp"
#include "fraglab/trace.hpp"

namespace fraglab::detail {

class FrameInterner {
 public:
  FrameInterner(Trace& trace, std::uint32_t keep) : trace_(trace), keep_(keep) {}

  std::uint32_t keep() const { return keep_; }

  // Text that is not valid UTF-8 (a pickle's str may hold lone surrogates, as Python's
  // "surrogatepass" writes them) has each byte of 0x80 and above replaced by '?': frames are
  // written to JSON (JSONL, reports), which must stay readable.
  std::uint32_t frame(std::string_view filename, std::int64_t line, std::string_view name);

  // `frames`: frame indices, innermost first, already cut to keep() by the caller.
  std::uint32_t stack(const std::vector<std::uint32_t>& frames) {
    if (frames.empty()) return kNoString;
    auto [it, added] = stack_index_.try_emplace(frames, static_cast<std::uint32_t>(trace_.stacks.size()));
    if (added) trace_.stacks.push_back(frames);
    return it->second;
  }

 private:
  Trace& trace_;
  std::uint32_t keep_;
  std::string key_;  // reused: the key of frame_index_ (frame_interner.cpp)
  // Seeded (fraglab/seeded_hash.hpp): frames come from the input, and must not be able to all land
  // in one bucket.
  std::unordered_map<std::string, std::uint32_t, SeededHash, std::equal_to<>> frame_index_;
  // Hashed, not ordered: stacks share their first ~25 frames (PyTorch's own), so ordered compares
  // walked those again at every level of a tree. Seeded like frame_index_.
  struct StackHash {
    SeededHash hash;
    std::size_t operator()(const std::vector<std::uint32_t>& s) const {
      std::uint64_t h = s.size();
      for (const std::uint32_t f : s) h = h * 0x100000001b3ull ^ f;
      return hash(h);
    }
  };
  std::unordered_map<std::vector<std::uint32_t>, std::uint32_t, StackHash> stack_index_;
};

// Keeps at most `keep` innermost frames of every stack of `trace` (0: drops the frame tables
// altogether), interning again so the tables stay unique. For readers whose source holds more
// than asked for (a JSONL trace written with more frames).
void keep_top_frames(Trace& trace, std::uint32_t keep);

}  // namespace fraglab::detail
