#!/usr/bin/env bash
# Installs what is missing, builds build/fraglab (Release) and replays a shipped sample trace
# through every policy, printing the table.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFRAGLAB_TESTS=OFF -DFRAGLAB_BENCH=OFF > /dev/null
cmake --build build --target fraglab -j "$(nproc)"
echo
build/fraglab replay traces/samples/two-phase.jsonl
