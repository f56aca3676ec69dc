// Replays a trace through one policy with the installed library and prints what a user's tool
// would: the policies the library registered and the replay's peak reserved bytes.
#include <cstdio>
#include <exception>

#include "fraglab/policy.hpp"
#include "fraglab/run_replay.hpp"
#include "fraglab/trace_io.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer TRACE SPEC\n");
    return 2;
  }
  try {
    std::printf("policies:");
    for (const fraglab::PolicyInfo* info : fraglab::PolicyRegistry::instance().all())
      std::printf(" %s", info->name.c_str());
    std::printf("\n");
    const fraglab::Trace trace = fraglab::read_trace(argv[1]);
    const fraglab::ReplayResult result = fraglab::run_replay(trace, argv[2], fraglab::parse_device_spec("sim"));
    std::printf("peak_reserved_bytes %llu\n", static_cast<unsigned long long>(result.metrics.peak_reserved));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
