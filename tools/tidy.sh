#!/usr/bin/env bash
# Runs clang-tidy, with the checks of .clang-tidy, over fraglab's own sources (src/, policies/,
# tests/, bench/), using the compile commands of a configured build. Prints each finding once and
# exits 1 when there is any, 0 when the tree is clean.
#
#   tools/tidy.sh                         # every source file build/ compiles
#   tools/tidy.sh build src/trace tests   # only files whose path starts with one of these
#   TIDY_JOBS=8 tools/tidy.sh             # parallel jobs (default: the number of cores)
#
# bench/ is in build/compile_commands.json only when configured with -DFRAGLAB_BENCH=ON. It takes
# a few seconds of CPU per file (tests/ most: GoogleTest's headers), so narrow it while you work.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
[[ $build = /* ]] || build=$root/$build
if [[ ! -f $build/compile_commands.json ]]; then
  echo "tidy.sh: no $build/compile_commands.json: configure first (cmake -S . -B build)" >&2
  exit 2
fi
runner=$(command -v run-clang-tidy || command -v run-clang-tidy-14 || true)
if [[ -z $runner ]]; then
  echo "tidy.sh: run-clang-tidy not found (Debian: apt-get install clang-tidy)" >&2
  exit 2
fi

# Paths as run-clang-tidy's regexes, under the root: our folders only (never _deps or the build).
if (($# == 0)); then set -- src policies tests bench; fi
regexes=()
for path in "$@"; do regexes+=("^$root/${path%/}"); done
files=$(grep -oE '"file": *"[^"]*"' "$build/compile_commands.json" | sed -E 's/.*"([^"]*)"$/\1/' |
  grep -E "$(IFS='|'; echo "${regexes[*]}")" | sort -u || true)
if [[ -z $files ]]; then
  echo "tidy.sh: no file in $build/compile_commands.json matches: $*" >&2
  exit 2
fi
echo "tidy.sh: $(printf '%s\n' "$files" | wc -l) file(s)" >&2

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# (run-clang-tidy always asks for colour: strip it.)
"$runner" -quiet -p "$build" -j "${TIDY_JOBS:-$(nproc)}" "${regexes[@]}" 2>&1 | sed -E 's/\x1b\[[0-9;]*m//g' > "$log" || true
# A header's findings come once per file that includes it: print each once.
findings=$(grep -E '^/.*: (warning|error): ' "$log" | sed "s|^$root/||" | sort -u || true)
if [[ -n $findings ]]; then
  printf '%s\n' "$findings"
  echo "tidy.sh: $(printf '%s\n' "$findings" | wc -l) finding(s)" >&2
  exit 1
fi
if grep -qE 'Error while processing|errors? generated' "$log"; then  # a file clang-tidy could not parse
  cat "$log" >&2
  exit 2
fi
echo "tidy.sh: clean"
