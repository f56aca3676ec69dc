// keep_top_frames(): cuts a trace's stacks to their innermost frames (frame_interner.hpp).
#include <simdjson.h>

#include <algorithm>

#include "trace/frame_interner.hpp"

namespace fraglab::detail {

namespace {

std::string valid_utf8(std::string_view s) {
  std::string out(s);
  if (simdjson::validate_utf8(s.data(), s.size())) return out;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return out;
}

}  // namespace

std::uint32_t FrameInterner::frame(std::string_view filename, std::int64_t line, std::string_view name) {
  Frame f{valid_utf8(filename), line, valid_utf8(name)};
  // "LINE:FILENAME_SIZE:FILENAME NAME": each part's end is known, so no two frames share a key
  // (the text may hold any byte, NUL included).
  key_.assign(std::to_string(line));
  key_.push_back(':');
  key_.append(std::to_string(f.filename.size()));
  key_.push_back(':');
  key_.append(f.filename);
  key_.append(f.name);
  auto [it, added] = frame_index_.try_emplace(key_, static_cast<std::uint32_t>(trace_.frames.size()));
  if (added) trace_.frames.push_back(std::move(f));
  return it->second;
}

void keep_top_frames(Trace& trace, std::uint32_t keep) {
  if (keep == 0) {
    trace.frames.clear();
    trace.stacks.clear();
    trace.event_stacks.clear();
    for (InitialAllocation& a : trace.initial.allocations) a.stack = kNoString;
    return;
  }
  const bool longer = std::any_of(trace.stacks.begin(), trace.stacks.end(),
                                  [&](const std::vector<std::uint32_t>& s) { return s.size() > keep; });
  if (!longer) return;  // already within the limit: the tables stay as read
  Trace cut;
  FrameInterner interner(cut, keep);
  std::vector<std::uint32_t> new_stack(trace.stacks.size(), kNoString);
  std::vector<std::uint32_t> frames;
  // Stacks in the order their users come (initial allocations, then events): the order a reader
  // meeting the cut stacks first would give them.
  auto remap = [&](std::uint32_t s) {
    if (s == kNoString || s >= trace.stacks.size()) return kNoString;
    if (new_stack[s] == kNoString) {
      frames.clear();
      const auto& old = trace.stacks[s];
      for (std::size_t i = 0; i < old.size() && i < keep; ++i) {
        const Frame& f = trace.frames[old[i]];
        frames.push_back(interner.frame(f.filename, f.line, f.name));
      }
      new_stack[s] = interner.stack(frames);
    }
    return new_stack[s];
  };
  for (InitialAllocation& a : trace.initial.allocations) a.stack = remap(a.stack);
  for (std::uint32_t& s : trace.event_stacks) s = remap(s);
  trace.frames = std::move(cut.frames);
  trace.stacks = std::move(cut.stacks);
}

}  // namespace fraglab::detail
