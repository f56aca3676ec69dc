// Reading kept stack frames (README "Stack frames"): a frame as text, and which frame of a stack
// names the source line that asked for the memory.
//
// A PyTorch stack recorded with C++ frames starts (innermost) with the allocator and PyTorch's
// own tensor-creation and dispatch frames: the same few in every stack, some 25 deep in the real
// snapshots, before the first Python frame. "The top frame" of a stack (FrameFilter::top_frame)
// is the source line that asked for the memory: the innermost Python frame (filename *.py) not
// ignored, or, in a stack without one (autograd's backward thread has none), the innermost frame
// not ignored.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fraglab/trace.hpp"

namespace fraglab {

// "filename:line:name" (the form memory_viz shows).
std::string frame_text(const Frame& frame);

// Substrings of a frame's name or filename that mark it as PyTorch's own, not the program's.
// The defaults: the frames torch.cuda._memory_viz hides (unwinding, the traceback gathering) and
// the allocator's, tensor creation's and the dispatcher's frames that stand above every
// allocating operator.
std::vector<std::string> default_frame_ignores();

struct FrameFilter {
  std::vector<std::string> ignore = default_frame_ignores();
  bool ignored(const Frame& frame) const;
  // The top frame of `stack` (indices into trace.frames, innermost first), as above; nullopt
  // when every frame is ignored or the stack is empty.
  std::optional<std::uint32_t> top_frame(const Trace& trace, std::span<const std::uint32_t> stack) const;
};

// How many frames `--by-frame` and `--top-at-peak` keep when --frames is not given: enough to
// reach past PyTorch's own frames (about 25 in the real snapshots) to the program's.
inline constexpr std::uint32_t kDefaultFramesKept = 64;

}  // namespace fraglab
