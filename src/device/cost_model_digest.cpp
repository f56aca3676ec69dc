// cost_model_digest: what identifies a cost model's figures in a sweep's results file
// (fraglab/cost_model.hpp), so that rows priced by different figures are never mixed.
#include <fmt/format.h>

#include "fraglab/cost_model.hpp"

namespace fraglab {

std::string cost_model_digest(const CostModel& model) {
  // FNV-1a (64 bit) over "name fixed_us per_gib_us\n" per call, in the file format's order, the
  // numbers in shortest round-trip form: the same figures give the same digest on every platform,
  // and the descriptions (gpu, driver, source) do not count, since they change no result.
  std::uint64_t h = 14695981039346656037ULL;
  for (std::size_t i = 0; i < kApiCallCount; ++i) {
    const ApiCall call = static_cast<ApiCall>(i);
    for (const char c : fmt::format("{} {} {}\n", api_call_name(call), model[call].fixed_us, model[call].per_gib_us)) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

}  // namespace fraglab
