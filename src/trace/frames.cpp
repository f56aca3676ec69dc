// Kept stack frames as text, and the frame filter (fraglab/frames.hpp).
#include "fraglab/frames.hpp"

#include <fmt/format.h>

namespace fraglab {

std::string frame_text(const Frame& frame) { return fmt::format("{}:{}:{}", frame.filename, frame.line, frame.name); }

std::vector<std::string> default_frame_ignores() {
  return {
      // torch/cuda/_memory_viz.py hides these: the unwinder, the gathering of the traceback, the
      // dispatcher's boxing and the Python interpreter's own C frames.
      "unwind::unwind",
      "CapturedTraceback::gather",
      "gather_with_cpp",
      "core/boxing",
      "/Register",
      "/Redispatch",
      "PyEval_",
      "PyObject_",
      "PyFunction_",
      "pythonrun.c",
      "Modules/main.c",
      "Objects/call.c",
      "Objects/methodobject.c",
      "pycore_ceval.h",
      "ceval.c",
      "cpython/abstract.h",
      "bytecodes.c",
      "__libc_",
      "_start",
      // The caching allocator itself and tensor creation, above every allocation.
      "CUDACachingAllocator",
      "at::detail::empty_",
      "_empty_generic",
      "at::native::empty_",
      "at::empty",
      // The dispatcher between an operator's call and its kernel.
      "c10::impl::",
      "at::_ops::",
      "c10::Dispatcher",
  };
}

bool FrameFilter::ignored(const Frame& frame) const {
  for (const std::string& s : ignore) {
    if (frame.name.find(s) != std::string::npos || frame.filename.find(s) != std::string::npos) return true;
  }
  return false;
}

namespace {
bool is_python(const Frame& frame) {
  return frame.filename.size() > 3 && frame.filename.compare(frame.filename.size() - 3, 3, ".py") == 0;
}
}  // namespace

std::optional<std::uint32_t> FrameFilter::top_frame(const Trace& trace, std::span<const std::uint32_t> stack) const {
  std::optional<std::uint32_t> first;  // the innermost frame not ignored, Python or not
  for (const std::uint32_t f : stack) {
    if (f >= trace.frames.size() || ignored(trace.frames[f])) continue;
    if (is_python(trace.frames[f])) return f;
    if (!first) first = f;
  }
  return first;
}

}  // namespace fraglab
