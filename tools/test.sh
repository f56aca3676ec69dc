#!/usr/bin/env bash
# Installs what is missing, builds the whole test suite under AddressSanitizer + UBSan in
# build-asan/ and runs it with ctest. Real snapshots are read from ../shared/traces/real when
# that folder exists; tests that need them are skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DFRAGLAB_SANITIZE=ON \
      -DFRAGLAB_BENCH=OFF > /dev/null
cmake --build build-asan -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
