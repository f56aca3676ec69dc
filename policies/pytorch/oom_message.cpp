// PyTorch's out-of-memory text, per version (allocator-model §5.4). The per-process NVML part
// ("Including non-PyTorch memory, this process has ...") is left out: no processes are simulated.
#include <fmt/format.h>

#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca {

// format_size: <= 1 KiB "N bytes", <= 1 MiB KiB, <= 1 GiB MiB, else GiB; two decimals.
std::string format_size(Bytes size) {
  if (size <= 1024) return fmt::format("{} bytes", size);
  if (size <= 1048576) return fmt::format("{:.2f} KiB", static_cast<double>(size) / 1024.0);
  if (size <= 1073741824ull) return fmt::format("{:.2f} MiB", static_cast<double>(size) / 1048576.0);
  return fmt::format("{:.2f} GiB", static_cast<double>(size) / 1073741824.0);
}

std::string oom_message(const OomFacts& f) {
  const std::string allowed = f.allowed ? format_size(*f.allowed) + " allowed; " : std::string();
  const Bytes unallocated = f.reserved > f.allocated ? f.reserved - f.allocated : 0;
  switch (oom_style(f.version)) {
    case OomStyle::Legacy:
      return fmt::format(
          "CUDA out of memory. Tried to allocate {} (GPU 0; {} total capacity; {} already allocated; {} free; "
          "{}{} reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
          "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
          "PYTORCH_CUDA_ALLOC_CONF",
          format_size(f.alloc_size), format_size(f.device_total), format_size(f.allocated), format_size(f.device_free),
          allowed, format_size(f.reserved));
    case OomStyle::Capacty:
      return fmt::format(
          "CUDA out of memory. Tried to allocate {}. GPU 0 has a total capacty of {} of which {} is free. "
          "Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but "
          "unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to "
          "avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
          format_size(f.alloc_size), format_size(f.device_total), format_size(f.device_free), format_size(f.allocated),
          format_size(unallocated));
    case OomStyle::Modern:
    case OomStyle::ModernDocs:
      break;
  }
  const char* link = oom_style(f.version) == OomStyle::Modern
                         ? "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
                         : "(https://docs.pytorch.org/docs/stable/notes/cuda.html"
                           "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
  return fmt::format(
      "CUDA out of memory. Tried to allocate {}. GPU 0 has a total capacity of {} of which {} is free. "
      "{}Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but "
      "unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
      "Memory Management  {}",
      format_size(f.alloc_size), format_size(f.device_total), format_size(f.device_free), allowed,
      format_size(f.allocated), format_size(unallocated), link);
}

}  // namespace fraglab::cca
