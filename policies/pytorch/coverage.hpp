// The settings a finished replay of the pytorch policy covers (coverage.cpp, decision_bounds.hpp).
#pragma once

#include <memory>

#include "fraglab/policy.hpp"

namespace fraglab::cca {

class CachingAllocator;

// nullptr unless the allocator recorded its decisions (record_decisions()) from the start.
std::unique_ptr<SettingCoverage> make_coverage(const CachingAllocator& allocator);

}  // namespace fraglab::cca
