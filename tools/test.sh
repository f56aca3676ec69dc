#!/usr/bin/env bash
# The test command (README "Set up and test"), what CI runs:
#  1. installs what is missing (tools/install-deps.sh);
#  2. builds the whole test suite under AddressSanitizer + UBSan in build-asan/ and runs it with
#     ctest. Real snapshots are read from ../shared/traces/real when that folder exists; tests that
#     need them are skipped otherwise, or fail when FRAGLAB_REQUIRE_REAL_TRACES=ON is set in the
#     environment (as CI sets it);
#  3. runs the fuzzers over their corpus and regression inputs, then briefly (tools/fuzz.sh smoke);
#  4. checks the formatting (tools/check-format.sh);
#  5. builds the command and the benchmarks as a Release build with warnings as errors in
#     build-release/, and runs every benchmark briefly, so they keep compiling and running (the
#     figures of such a short run are not measurements: README "Speed" says how to measure).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
tools/install-deps.sh

# -Og: a third less compile time than -O1 under the sanitizers (841 against 1,292 CPU seconds for
# this build), and the suite runs about as fast. -g1: line tables only; sanitizer reports still
# name file and line, and the build is much lighter. No -Werror here: with the sanitizers'
# instrumentation GCC 12 can warn falsely (at -O1, -Wmaybe-uninitialized inside libstdc++'s
# std::regex); the Release build below is the one held to zero warnings.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DFRAGLAB_SANITIZE=ON \
      -DFRAGLAB_BENCH=OFF \
      -DFRAGLAB_REQUIRE_REAL_TRACES="${FRAGLAB_REQUIRE_REAL_TRACES:-OFF}" > /dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$jobs"

# libFuzzer harnesses (clang 14, ASan+UBSan, build-fuzz/): every corpus and regression input, then
# about a minute of fuzzing (README "Reliability"; tools/fuzz.sh campaign runs a long one).
tools/fuzz.sh smoke

tools/check-format.sh

cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFRAGLAB_WERROR=ON -DFRAGLAB_TESTS=OFF \
      -DFRAGLAB_BENCH=ON > /dev/null
cmake --build build-release -j "$jobs"
build-release/fraglab_bench --benchmark_min_time=0.001 > build-release/bench-smoke.txt
echo "benchmarks: every one ran (output in build-release/bench-smoke.txt)"
