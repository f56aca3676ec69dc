// The restricted pickle machine (src/trace/pickle.cpp, PickleDocument) on any bytes.
// Properties (pickle.hpp's invariants):
//  - bad input is an InputError, never anything else (fuzz_support.hpp);
//  - the fast paths (pickle_fast_paths.cpp, the inline LONG1 decode) change nothing: a parse
//    through the checked switch alone (PickleOptions::fast_paths = false) gives the same
//    document, containers aliased the same way, or fails with the same message;
//  - skip_key changes nothing but the values under that key: with skip_key "frames" (what the
//    snapshot reader uses), with or without the fast paths, the document is the reference
//    except for Skipped values there, and the same input fails with the same message.
#include <memory>

#include "fuzz_support.hpp"
#include "pickle_tree.hpp"
#include "trace/pickle.hpp"

namespace fraglab::fuzz {

void fuzz_one(std::string_view data) {
  using pickle::PickleDocument;
  using pickle::PickleOptions;
  constexpr std::string_view kOrigin = "fuzz.pickle";
  const PickleOptions variants[] = {
      {.skip_key = {}, .fast_paths = true},
      {.skip_key = "frames", .fast_paths = true},
      {.skip_key = "frames", .fast_paths = false},
  };
  std::unique_ptr<PickleDocument> reference;
  const std::string reference_error = input_error_of(
      [&] { reference = std::make_unique<PickleDocument>(data, kOrigin, PickleOptions{.fast_paths = false}); });
  for (const PickleOptions& options : variants) {
    std::unique_ptr<PickleDocument> doc;
    const std::string error = input_error_of([&] { doc = std::make_unique<PickleDocument>(data, kOrigin, options); });
    const std::string variant = std::string("skip_key '") + std::string(options.skip_key) + "', fast paths " +
                                (options.fast_paths ? "on" : "off");
    if (error != reference_error)
      fail("checked switch alone: '" + reference_error + "'; " + variant + ": '" + error + "'");
    if (!error.empty()) continue;
    require(doc->protocol() == reference->protocol(), "protocols differ with " + variant);
    PickleTreeCompare compare(options.skip_key);
    const std::string why = compare.differences(reference->root(), doc->root());
    if (!why.empty()) fail("documents differ with " + variant + ": " + why);
  }
}

}  // namespace fraglab::fuzz
