// The memory budget: the most heap memory one fraglab process may hold (`--max-memory`, README
// "Reliability"). Readers and generators compare what an input would make them build with it
// before they build it, so an input that asks for too much is refused in one line naming it,
// instead of ending in an allocation failure. The command also counts every heap allocation
// against it (src/cli/memory_accounting.cpp): an allocation past the budget throws std::bad_alloc,
// which the readers turn into the same kind of one-line error.
#pragma once

#include <cstdint>
#include <string_view>

#include "fraglab/types.hpp"

namespace fraglab {

// The budget in bytes. Until set_memory_budget() is called: three quarters of the machine's
// physical memory (a process that needs more would be swapping or killed anyway).
Bytes memory_budget();
void set_memory_budget(Bytes bytes);
// The default above, for --help texts and messages.
Bytes default_memory_budget();

// Throws InputError("WHAT: needs about ESTIMATE, more than the memory budget BUDGET (--max-memory)")
// when `estimate` exceeds the budget. `what` names the input or the thing being built.
void check_memory_estimate(Bytes estimate, std::string_view what);

}  // namespace fraglab
