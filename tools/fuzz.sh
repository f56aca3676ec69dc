#!/usr/bin/env bash
# The fuzzers of tests/fuzz (libFuzzer, clang 14, ASan + UBSan; README "Set up and test").
#
#   tools/fuzz.sh smoke                  build build-fuzz/, run every harness over its corpus and
#                                        its regressions, then fuzz each briefly (~1 minute in all);
#                                        what the test command runs
#   tools/fuzz.sh campaign [SECONDS]     fuzz each harness SECONDS (default 300), two at a time;
#                                        new inputs go to build-fuzz/campaign/HARNESS/ (never into
#                                        the repository), crashes to build-fuzz/campaign/crashes/
#   tools/fuzz.sh coverage               build build-fuzz-cov/ for source-based coverage, run each
#                                        harness over its corpus (plus the campaign's inputs when
#                                        there are some) and print line coverage of the readers
#   tools/fuzz.sh build                  just build build-fuzz/
#
# Environment: FUZZ_JOBS (default 2: the machine is shared), FUZZ_HARNESSES (default all),
# SMOKE_SECONDS (fuzzing time per harness in smoke, default 12).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-smoke}"
jobs="${FUZZ_JOBS:-2}"
harnesses=(${FUZZ_HARNESSES:-pickle snapshot jsonl trace_file model baseline results})
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Limits every run shares: an input may take at most 10 s and 2 GiB (the readers' own budget is
# far below; hitting these is a finding, not a flaky run).
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048)
# The corpus and regression inputs are known ones; the gzip bombs among them take about 6 s of CPU
# each under the sanitizers, and libFuzzer's timeout is wall time: on a loaded 2-core machine 10 s
# is too close, so their runs get 60 s (a fuzzer-made input still gets 10).
replay_limits=(-timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=2048)

configure() {  # build dir, extra cmake args...
  local dir="$1"
  shift
  cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DFRAGLAB_FUZZ=ON -DFRAGLAB_TESTS=OFF \
        -DFRAGLAB_BENCH=OFF -DFRAGLAB_LAYER_CHECKS=OFF "$@" > /dev/null
  cmake --build "$dir" --target fuzzers -j "$jobs"
}

# Runs of the corpus and regressions: each input once, any crash fails.
replay_inputs() {  # harness
  local h="$1"
  build-fuzz/fuzz/fuzz_"$h" -runs=0 "${replay_limits[@]}" tests/fuzz/corpus/"$h" tests/fuzz/regressions/"$h" \
    > "build-fuzz/logs/$h-inputs.log" 2>&1 || {
    cat "build-fuzz/logs/$h-inputs.log" >&2
    echo "fuzz: $h: an input of tests/fuzz/corpus/$h or regressions/$h fails (log above)" >&2
    return 1
  }
}

# Fuzzes one harness for $2 seconds from its corpus; new inputs go to $3 (scratch), a crash
# reproducer to $4. Not from the regressions: mutating a 64 MiB gzip bomb is slow and finds
# nothing new (replay_inputs runs each regression once).
fuzz_for() {  # harness seconds new-corpus-dir artifact-dir
  local h="$1" seconds="$2" scratch="$3" artifacts="$4"
  mkdir -p "$scratch" "$artifacts"
  build-fuzz/fuzz/fuzz_"$h" -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 \
    -artifact_prefix="$artifacts/$h-" -dict=tests/fuzz/dictionaries/"$h".dict \
    "$scratch" tests/fuzz/corpus/"$h" > "build-fuzz/logs/$h-fuzz.log" 2>&1 || {
    tail -n 60 "build-fuzz/logs/$h-fuzz.log" >&2
    echo "fuzz: $h found a crash, leak or timeout: reproducer in $artifacts (log: build-fuzz/logs/$h-fuzz.log)" >&2
    return 1
  }
}

# Fuzzes every harness for $1 seconds, FUZZ_JOBS at a time, into build-fuzz/$2/HARNESS (new
# inputs) and build-fuzz/$2/crashes; fails when any found a crash, leak or timeout.
fuzz_all() {  # seconds run-name
  local seconds="$1" run="$2" status=0 pids=()
  for h in "${harnesses[@]}"; do
    fuzz_for "$h" "$seconds" "build-fuzz/$run/$h" "build-fuzz/$run/crashes" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || status=1
      pids=("${pids[@]:1}")
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  return "$status"
}

case "$mode" in
  build)
    configure build-fuzz
    ;;
  smoke)
    start=$SECONDS
    configure build-fuzz
    mkdir -p build-fuzz/logs
    echo "fuzz: built build-fuzz/ in $((SECONDS - start)) s"
    for h in "${harnesses[@]}"; do replay_inputs "$h"; done
    echo "fuzz: every corpus and regression input passes"
    seconds="${SMOKE_SECONDS:-12}"
    # Each harness fuzzes from a fresh scratch corpus.
    for h in "${harnesses[@]}"; do rm -rf "build-fuzz/smoke/$h"; done
    fuzz_all "$seconds" smoke || exit 1
    echo "fuzz: smoke passed (${#harnesses[@]} harnesses, ${seconds} s of fuzzing each, $((SECONDS - start)) s in all)"
    ;;
  campaign)
    seconds="${2:-300}"
    configure build-fuzz
    mkdir -p build-fuzz/logs
    status=0
    fuzz_all "$seconds" campaign || status=1
    for h in "${harnesses[@]}"; do
      grep -h "stat::number_of_executed_units\|stat::peak_rss_mb\|cov:" "build-fuzz/logs/$h-fuzz.log" |
        tail -n 3 | tr '\n' ' ' | sed "s/^/$h: /"
      echo
    done
    echo "fuzz: campaign inputs in build-fuzz/campaign/HARNESS/ (minimise with -merge=1 before adding any to tests/fuzz/corpus)"
    exit "$status"
    ;;
  coverage)
    configure build-fuzz-cov -DFRAGLAB_FUZZ_COVERAGE=ON
    rm -rf build-fuzz-cov/profiles
    mkdir -p build-fuzz-cov/profiles
    objects=()
    for h in "${harnesses[@]}"; do
      inputs=(tests/fuzz/corpus/"$h" tests/fuzz/regressions/"$h")
      [ -d "build-fuzz/campaign/$h" ] && inputs+=("build-fuzz/campaign/$h")
      LLVM_PROFILE_FILE="build-fuzz-cov/profiles/$h.profraw" build-fuzz-cov/fuzz/fuzz_"$h" -runs=0 "${limits[@]}" \
        "${inputs[@]}" > "build-fuzz-cov/profiles/$h.log" 2>&1 || echo "fuzz: coverage: $h failed on an input" >&2
      llvm-profdata-14 merge -sparse "build-fuzz-cov/profiles/$h.profraw" -o "build-fuzz-cov/profiles/$h.profdata"
      objects+=("build-fuzz-cov/fuzz/fuzz_$h")
    done
    # The files each harness is for; line coverage of those, per harness.
    declare -A sources=(
      [pickle]="src/trace/pickle.cpp src/trace/pickle_fast_paths.cpp src/trace/pickle_decoders.cpp src/trace/pickle_value.cpp"
      [snapshot]="src/trace/snapshot_reader.cpp src/trace/pickle.cpp src/trace/pickle_fast_paths.cpp"
      [jsonl]="src/trace/jsonl_reader.cpp src/trace/jsonl_writer.cpp src/trace/trace.cpp"
      [trace_file]="src/trace/trace_file.cpp src/trace/input_sniff.cpp"
      [model]="src/workload/model_config.cpp src/workload/hf_config.cpp"
      [baseline]="src/sweep/check.cpp"
      [results]="src/sweep/results_file.cpp src/sweep/results_format.cpp src/sweep/sweep_meta.cpp src/sweep/shards.cpp"
    )
    for h in "${harnesses[@]}"; do
      echo "== $h"
      # shellcheck disable=SC2086
      llvm-cov-14 report "build-fuzz-cov/fuzz/fuzz_$h" -instr-profile="build-fuzz-cov/profiles/$h.profdata" \
        ${sources[$h]} | awk '$1 != "Filename" && $1 !~ /^-/ && NF >= 10 {
          printf "  %-26s lines %5d  missed %5d  covered %s\n", $1, $8, $9, $10 }'
    done
    ;;
  *)
    echo "usage: tools/fuzz.sh smoke | campaign [SECONDS_PER_HARNESS] | coverage | build" >&2
    exit 2
    ;;
esac
