#!/usr/bin/env bash
# ThreadSanitizer run of the suites whose code runs on several threads: sweeps and their shared
# replays (src/sweep/runner.cpp), trace reading on a thread per file (cmd_sweep), maxbatch's
# searches, the streamed replay's reader thread (streamed_replay.cpp), and diffs. Not part of the
# test command (a third build of the library: ~15 minutes on 2 cores); run it after changing any
# of them. The command-line tests run the build's own `fraglab`, instrumented too.
#
#   tools/tsan.sh [BUILD_DIR]     (default build-tsan/)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-tsan}"
suites=(test_sweep test_maxbatch test_cli test_replay)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS=-fsanitize=thread \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DFRAGLAB_BENCH=OFF -DFRAGLAB_LAYER_CHECKS=OFF >/dev/null
cmake --build "$build" -j"${TSAN_JOBS:-2}" --target fraglab "${suites[@]}"
# A race fails the run at once, naming both accesses.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
# Tests that bound a run's peak resident memory are left out: ThreadSanitizer's shadow memory
# takes several times what the program does.
for suite in "${suites[@]}"; do
  echo "tsan: $suite"
  "$build/$suite" --gtest_brief=1 --gtest_filter='-*PeakMemory*'
done
echo "tsan: no data race in ${suites[*]}"
