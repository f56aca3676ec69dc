// The note under a sweep table when the capacity was assumed: which rows differ only in an
// option that acts on a share of the GPU's memory and gave identical results.
#pragma once

#include <string>
#include <vector>

#include "fraglab/sweep.hpp"

namespace fraglab {

// `rows`: one section (one trace, one device), in canonical order. Empty when no such rows.
std::string identical_rows_note(const std::vector<SweepRow>& rows, const std::vector<std::string>& keys,
                                Bytes assumed_capacity);

}  // namespace fraglab
