#!/usr/bin/env bash
# Builds fsdpc and runs every test, in three stages (CI runs them all):
#   normal    build/ (tools/build.sh) and the whole CTest suite
#   sanitize  build-asan/: the same suite built with AddressSanitizer and
#             UndefinedBehaviorSanitizer (CUDA off; suppressions for Open MPI's,
#             hwloc's and oneDNN's own reports in test/sanitizer/)
#   fuzz      build-fuzz/ (clang): each libFuzzer target in test/fuzz/ for a
#             bounded time, seeded from test/fuzz/corpus/<target>/
# Each stage ends with one line "test.sh: <stage> passed|FAILED in <time>";
# a failed stage does not stop the later ones, but the script exits 1.
#
# Usage: tools/test.sh [--only normal|sanitize|fuzz] [--fuzz-seconds N]
#        tools/test.sh --sanitize          the sanitize stage alone
#        tools/test.sh --fuzz [SECONDS]    the fuzz stage alone, SECONDS per target
# FSDPC_JOBS caps build and test parallelism (default: all cores).
# A fuzz finding is kept as build-fuzz/findings/<target>/crash-* (or leak-,
# timeout-, oom-): reproduce it with build-fuzz/<target> FILE.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${FSDPC_JOBS:-$(nproc)}

usage() { sed -n '12,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
stages=(normal sanitize fuzz)
fuzz_seconds=60
while (($# > 0)); do
  case $1 in
    --only)
      [[ $# -ge 2 && $2 =~ ^(normal|sanitize|fuzz)$ ]] || usage
      stages=("$2"); shift 2 ;;
    --sanitize) stages=(sanitize); shift ;;
    --fuzz)
      stages=(fuzz); shift
      if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then fuzz_seconds=$1; shift; fi ;;
    --fuzz-seconds)
      [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || usage
      fuzz_seconds=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
((fuzz_seconds > 0)) || { echo "test.sh: --fuzz SECONDS must be at least 1" >&2; exit 2; }

# The sanitizers' settings, for every instrumented process (mpirun passes its
# environment on to the ranks it starts on this host). UBSan is compiled with
# -fno-sanitize-recover=all, so any report ends the process with an error.
# test/sanitizer/keep_loaded.cpp (preloaded) keeps Open MPI's components
# mapped until LeakSanitizer reports, so their leaks match lsan.supp; ASan's
# check that its runtime is loaded first is off because the shim is.
sanitizer_env() {
  local supp=$root/test/sanitizer
  export LD_PRELOAD=$root/build-asan/libfsdpc_keep_loaded.so
  export ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0:check_initialization_order=1"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="suppressions=$supp/ubsan.supp:print_stacktrace=1:halt_on_error=1"
}

stage_normal() {
  bash "$root/tools/build.sh"
  (cd "$root/build" && ctest --output-on-failure -j "$jobs")
}

stage_sanitize() {
  bash "$root/tools/install-deps.sh"
  # -O1 -g1 (line tables): what ASan's authors advise; against -O2 -g each file
  # compiles in ~40% less time into objects 2.4x smaller, which CI's 2 cores need.
  cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DFSDPC_CUDA=OFF -DFSDPC_SANITIZE=ON >/dev/null
  cmake --build "$root/build-asan" -j "$jobs"
  c++ -shared -fPIC -O1 -o "$root/build-asan/libfsdpc_keep_loaded.so" "$root/test/sanitizer/keep_loaded.cpp"
  sanitizer_env
  (cd "$root/build-asan" && ctest --output-on-failure -j "$jobs")
}

# One fuzz target for fuzz_seconds; prints its line, and the log's tail on
# a finding (then fails).
fuzz_one() {
  local name=$1 build=$2
  # New inputs go to the build's corpus (first folder); the checked-in
  # seeds (second folder) are only read.
  local corpus=$build/corpus/$name findings=$build/findings/$name log=$build/logs/$name.log
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  if "$build/$name" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$findings/" \
       "$corpus" "$root/test/fuzz/corpus/${name#fuzz_}" >"$log" 2>&1; then
    echo "test.sh: fuzz: $name: $(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?') runs, no finding"
  else
    tail -n 60 "$log" >&2
    echo "test.sh: fuzz: $name: FINDING, input kept in $findings/ (log: $log)" >&2
    return 1
  fi
}

stage_fuzz() {
  bash "$root/tools/install-deps.sh"
  local build=$root/build-fuzz
  cmake -S "$root/test/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build "$build" -j "$jobs"
  # No Open MPI here: the fast unwinder names every frame, and fuzzing is
  # malloc-heavy.
  export ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # Each target is one process on one core: $jobs of them at a time.
  local failed=0 src name running=0
  for src in "$root"/test/fuzz/fuzz_*.cpp; do
    name=$(basename "$src" .cpp)
    if ((running >= jobs)); then
      wait -n || failed=1
      running=$((running - 1))
    fi
    fuzz_one "$name" "$build" &
    running=$((running + 1))
  done
  while ((running > 0)); do
    wait -n || failed=1
    running=$((running - 1))
  done
  return $failed
}

summary=()
status=0
for stage in "${stages[@]}"; do
  start=$SECONDS
  echo "test.sh: $stage: starting"
  # set -e holds inside the stage only outside an `if` condition.
  set +e
  (set -e; "stage_$stage")
  rc=$?
  set -e
  if ((rc == 0)); then result=passed; else result=FAILED; status=1; fi
  took=$((SECONDS - start))
  line=$(printf 'test.sh: %-8s %s in %dm%02ds' "$stage" "$result" $((took / 60)) $((took % 60)))
  echo "$line"
  summary+=("$line")
done
if ((${#summary[@]} > 1)); then printf '%s\n' "${summary[@]}"; fi
exit $status
