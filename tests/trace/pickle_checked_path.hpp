// Test helper for the pickle reader's fast paths: a document parsed with them must be the one the
// checked opcode switch alone builds, or fail with the same message.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "fraglab/types.hpp"
#include "fuzz/pickle_tree.hpp"
#include "trace/pickle.hpp"

namespace fraglab::pickle {

// Parses `bytes` (from a buffer of exactly its size, so a read past the end is caught by the
// sanitizers) with the fast paths, with and without skipping frames, and expects what the checked
// switch alone gives. `expect_frames_skipped`: a document that parses must have had frames to skip.
inline void expect_as_checked_path(const std::string& bytes, const std::string& what,
                                   bool expect_frames_skipped = false) {
  std::unique_ptr<char[]> buf(new char[bytes.size()]);
  if (!bytes.empty()) std::memcpy(buf.get(), bytes.data(), bytes.size());
  const std::string_view exact(buf.get(), bytes.size());
  auto error_of = [&](std::unique_ptr<PickleDocument>& doc, const PickleOptions& options) {
    try {
      doc = std::make_unique<PickleDocument>(exact, "s.pickle", options);
      return std::string();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  std::unique_ptr<PickleDocument> reference;
  const std::string reference_error = error_of(reference, PickleOptions{.skip_key = {}, .fast_paths = false});
  const PickleOptions variants[] = {{.skip_key = {}, .fast_paths = true}, {.skip_key = "frames", .fast_paths = true}};
  for (const PickleOptions& options : variants) {
    std::unique_ptr<PickleDocument> doc;
    const std::string error = error_of(doc, options);
    ASSERT_EQ(error, reference_error) << what << ", skip_key '" << options.skip_key << "'";
    if (!error.empty()) continue;
    fuzz::PickleTreeCompare compare(options.skip_key);
    ASSERT_EQ(compare.differences(reference->root(), doc->root()), "")
        << what << ", skip_key '" << options.skip_key << "'";
    if (expect_frames_skipped && !options.skip_key.empty()) {
      EXPECT_TRUE(doc->skipped()) << what;
    }
  }
}

}  // namespace fraglab::pickle
