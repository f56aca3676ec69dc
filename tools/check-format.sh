#!/usr/bin/env bash
# Checks that every C++ file in the repository is formatted as .clang-format says (clang-format
# from Debian's clang-format package). `tools/check-format.sh --fix` reformats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "format check failed: run tools/check-format.sh --fix" >&2
  exit 1
fi
echo "format check: ${#files[@]} files formatted as .clang-format says"
