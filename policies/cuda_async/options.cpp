// Option parsing for cuda_async: each key and its accepted values (names, defaults and the
// unknown-option error come from the registered table, through kit::OptionReader).
#include "cuda_async/options.hpp"

#include "fraglab/policy_kit.hpp"

namespace fraglab::cuda_async {

Options parse_options(std::string_view text) {
  const kit::OptionReader reader = kit::OptionReader::of("cuda_async", text);
  return Options{
      reader.get<Bytes>("release_threshold", "a byte size (e.g. 0, 512MiB, 4GiB) or 'max'",
                        [](std::string_view v) { return v == "max" ? kNoTrim : kit::parse_bytes(v); }),
      reader.flag("opportunistic"),
      reader.flag("internal_dependencies"),
      static_cast<SyncOnMark>(reader.choice("sync_on_mark", {"step", "all", "none"})),
  };
}

}  // namespace fraglab::cuda_async
