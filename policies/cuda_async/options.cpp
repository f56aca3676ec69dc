// Option parsing for cuda_async: each key, its accepted values, and an error naming both.
#include "cuda_async/options.hpp"

#include <fmt/format.h>

#include "fraglab/policy.hpp"
#include "fraglab/sim_device.hpp"

namespace fraglab::cuda_async {
namespace {

bool parse_flag(const OptionItem& item) {
  if (item.value == "True" || item.value == "true") return true;
  if (item.value == "False" || item.value == "false") return false;
  throw InputError(fmt::format("cuda_async: {}: expected True or False, got '{}'", item.key, item.value));
}

}  // namespace

Options parse_options(std::string_view text) {
  Options options;
  for (const OptionItem& item : split_options(text, "cuda_async")) {
    if (item.key == "release_threshold") {
      if (item.value == "max") {
        options.release_threshold = kNoTrim;
      } else {
        try {
          options.release_threshold = parse_byte_size(item.value, "cuda_async: release_threshold");
        } catch (const InputError&) {
          throw InputError(fmt::format(
              "cuda_async: release_threshold: expected a byte size (e.g. 0, 512MiB, 4GiB) or 'max', got '{}'",
              item.value));
        }
      }
    } else if (item.key == "opportunistic") {
      options.opportunistic = parse_flag(item);
    } else if (item.key == "internal_dependencies") {
      options.internal_dependencies = parse_flag(item);
    } else if (item.key == "sync_on_mark") {
      if (item.value == "step")
        options.sync_on_mark = SyncOnMark::Step;
      else if (item.value == "all")
        options.sync_on_mark = SyncOnMark::All;
      else if (item.value == "none")
        options.sync_on_mark = SyncOnMark::None;
      else
        throw InputError(fmt::format("cuda_async: sync_on_mark: expected step, all or none, got '{}'", item.value));
    } else {
      throw InputError(fmt::format(
          "cuda_async: unknown option '{}' (accepted: release_threshold, opportunistic, internal_dependencies, "
          "sync_on_mark)",
          item.key));
    }
  }
  return options;
}

}  // namespace fraglab::cuda_async
