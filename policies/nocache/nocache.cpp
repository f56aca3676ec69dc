// nocache: every request goes straight to the device and every free straight back, as PyTorch
// does with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (allocator-model §5: "plain cudaMalloc/cudaFree, allocator
// bypassed"). The honest baseline: no cache, so no fragmentation inside the allocator and no
// retries, but one device call per allocation and per free.
//
// Invariant: every live block is exactly one device malloc range of `requested` bytes.
#include <fmt/format.h>

#include "fraglab/policy.hpp"
#include "fraglab/policy_kit.hpp"

namespace fraglab {
namespace {

class NoCachePolicy final : public kit::DirectDefaults<NoCachePolicy> {
 public:
  explicit NoCachePolicy(Device& device) : device_(device) {}

  std::optional<Block> allocate(Bytes size, StreamId stream) override {
    std::optional<Addr> addr = device_.malloc(size);
    if (!addr) {
      ++counters_.num_ooms;
      last_oom_ = fmt::format("nocache: device malloc of {} bytes failed ({} of {} bytes reserved)", size,
                              device_.reserved(), device_.capacity());
      return std::nullopt;
    }
    return Block{*addr, size, size, stream, 0};
  }
  // The memory is still in use by other streams until the free completes.
  void free_requested(const Block& /*block*/) override {}
  void free_completed(const Block& block) override { device_.free(block.addr); }

  PolicyCounters counters() const override { return counters_; }
  std::string last_oom_message() const override { return last_oom_; }

 private:
  Device& device_;
  PolicyCounters counters_;
  std::string last_oom_;
};

const PolicyRegistration registration{PolicyInfo{
    "nocache",
    "no caching: one cudaMalloc per request and one cudaFree per free (PYTORCH_NO_CUDA_MEMORY_CACHING=1)",
    "PyTorch's caching bypass (docs/allocator-model.md §5). Reserved memory is the driver's: each request rounded "
    "to 512 bytes by the simulated device; the driver's own packing of small allocations is not modelled.",
    {},
    [](std::string_view options, Device& device) -> std::unique_ptr<Policy> {
      if (!options.empty()) {
        throw InputError(fmt::format("nocache: takes no options (got '{}')", options));
      }
      return std::make_unique<NoCachePolicy>(device);
    }}};

}  // namespace
}  // namespace fraglab
