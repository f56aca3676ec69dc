// parse_snapshot() and parse_snapshot_devices() with the pickle reader's options given, for the
// fuzzers' properties (tests/fuzz): the Trace must not depend on them (not part of any API).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "fraglab/trace_io.hpp"
#include "trace/pickle.hpp"

namespace fraglab {

// What the readers use: stack frames are not built (skip_key "frames"), fast paths on.
inline constexpr pickle::PickleOptions kSnapshotPickle{.skip_key = "frames"};

Trace parse_snapshot(std::string_view bytes, std::string_view origin, const TraceReadOptions& options,
                     const pickle::PickleOptions& pickle_options);
std::vector<std::pair<int, Trace>> parse_snapshot_devices(std::string_view bytes, std::string_view origin,
                                                          const pickle::PickleOptions& pickle_options);

}  // namespace fraglab
