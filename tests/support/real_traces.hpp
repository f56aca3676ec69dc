// Real PyTorch snapshots are read from ../shared/traces/real next to the project. Without that
// folder the tests that need them are skipped, unless the build was configured with
// FRAGLAB_REQUIRE_REAL_TRACES=ON (as CI is): then they fail, so a missing folder cannot pass the
// gate silently.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#ifndef FRAGLAB_REQUIRE_REAL_TRACES
#define FRAGLAB_REQUIRE_REAL_TRACES 0
#endif

// Skips (or fails, see above) the current test when PATH does not exist.
#define FRAGLAB_NEEDS_REAL_TRACE(path)                                                    \
  do {                                                                                    \
    if (!std::filesystem::exists(path)) {                                                 \
      if (FRAGLAB_REQUIRE_REAL_TRACES)                                                    \
        FAIL() << "real trace " << (path) << " missing (FRAGLAB_REQUIRE_REAL_TRACES=ON)"; \
      GTEST_SKIP() << "no real trace at " << (path);                                      \
    }                                                                                     \
  } while (0)
