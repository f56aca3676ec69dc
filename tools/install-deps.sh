#!/usr/bin/env bash
# Installs the Debian packages fraglab builds with, if any are missing. Needs root (or sudo).
set -euo pipefail
# The fuzzers (tools/fuzz.sh) need clang-14 (libFuzzer is clang's), libclang-rt-14-dev (the
# libFuzzer, ASan and UBSan runtimes clang links; only recommended by clang-14, and recommends are
# not installed here) and llvm-14 (llvm-profdata-14 and llvm-cov-14, for `tools/fuzz.sh coverage`).
# python3-torch (large: it pulls in PyTorch's CPU build) gives the tests PyTorch's own snapshot
# viewer code, torch.cuda._memory_viz, to read what `replay --export-snapshot` writes.
# chromium: tests/report loads `fraglab report`'s page in it, headless (skipped where it is missing).
packages=(cmake g++ make pkg-config zlib1g-dev libboost-program-options-dev nlohmann-json3-dev libfmt-dev
          libspdlog-dev libsimdjson-dev libgtest-dev libgmock-dev libbenchmark-dev clang-format
          clang-14 libclang-rt-14-dev llvm-14 python3-torch chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
