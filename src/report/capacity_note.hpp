// The note under a sweep table: which rows differ only in an option that acts on a share of the
// GPU's memory and gave identical results, when that is because the capacity was assumed or,
// for garbage_collection_threshold, because no memory fraction was set.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fraglab/sweep.hpp"

namespace fraglab {

// `rows`: one section (one trace, one device), in canonical order; `assumed_capacity`: the
// capacity the runs had without one being given (nullopt: it was given). Empty when no such rows.
std::string identical_rows_note(const std::vector<SweepRow>& rows, const std::vector<std::string>& keys,
                                std::optional<Bytes> assumed_capacity);

}  // namespace fraglab
