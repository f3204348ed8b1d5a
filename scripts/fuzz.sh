#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds egw's fuzz targets with clang, libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer
# (into build-fuzz/) and runs each for a bounded time, starting from its committed corpus
# (tests/fuzz/corpus/<target>/). See docs/testing.md, "Fuzzing".
#
#   scripts/fuzz.sh [--time SECONDS] [--results FILE.json] [TARGET...]
#
# TARGET: packet watch manifest config cli kubeconfig sync egress_firewall dns_name_resolver egress_qos (default: all), each run for SECONDS
# (default 25, or $FUZZ_TIME), one process each (-jobs 1: the machine is shared). New inputs go
# to build-fuzz/fuzz-corpus/<target>/, kept between runs; fold the useful ones into the committed
# corpus with -merge=1 (docs/testing.md). A crash, a sanitizer report, a violated invariant, a
# timeout (10 s for one input) or running out of memory fails the target: its reproducer is left in
# build-fuzz/fuzz-artifacts/<target>/ and printed (hex) in the output. --results writes the
# outcome (one test per target) in the format of tests/results.py for scripts/test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_TIME:-25}
# FUZZ_RUNS and FUZZ_SEED make a run repeatable: at most FUZZ_RUNS inputs per target (still capped
# by the time) from a fixed seed, so the same tree explores the same inputs on every machine.
runs=${FUZZ_RUNS:-}
seed=${FUZZ_SEED:-0}
results=
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --time) seconds=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    -h|--help) sed -n '3,16p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(packet watch manifest config cli kubeconfig sync egress_firewall dns_name_resolver egress_qos)

dir=build-fuzz
summary=()   # "target|passed|reason"

write_results() {
  [ -n "$results" ] || return 0
  printf '%s\n' "${summary[@]}" | python3 -c '
import json, sys
res = {"suite": "fuzz", "passed": 0, "failed": [], "skipped": []}
for line in sys.stdin.read().splitlines():
    target, ok, reason = line.split("|", 2)
    if ok == "pass":
        res["passed"] += 1
    elif ok == "skip":
        res["skipped"].append({"id": "fuzz::" + target, "reason": reason})
    else:
        res["failed"].append({"id": "fuzz::" + target, "reason": reason})
json.dump(res, open(sys.argv[1], "w"), indent=1)
' "$results"
}

if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: clang++-14 is not installed (scripts/deps.sh installs it); no fuzzing"
  for t in "${targets[@]}"; do summary+=("$t|skip|clang++-14 is not installed"); done
  write_results
  exit 0
fi

if [ ! -f "$dir/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 meson setup "$dir" --buildtype=debugoptimized -Dfuzzing=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dtests=true >/dev/null || {
    for t in "${targets[@]}"; do summary+=("$t|fail|meson setup of $dir failed"); done
    write_results; exit 1; }
fi
build_targets=()
for t in "${targets[@]}"; do build_targets+=("tests/fuzz/fuzz_$t"); done
if ! ninja -C "$dir" "${build_targets[@]}"; then
  for t in "${targets[@]}"; do summary+=("$t|fail|the fuzz build failed"); done
  write_results
  exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=0
for t in "${targets[@]}"; do
  work=$dir/fuzz-corpus/$t
  artifacts=$dir/fuzz-artifacts/$t
  log=$dir/fuzz-logs/$t.txt
  rm -rf "$artifacts"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  echo "== fuzz $t: $seconds s"
  # -max_len: the packet target takes at most 1838 bytes of frame; the text formats get room.
  maxlen=8192
  [ "$t" = packet ] && maxlen=1900
  bounds=(-max_total_time="$seconds" -seed="$seed")
  [ -n "$runs" ] && bounds+=(-runs="$runs")
  timeout --kill-after=30 $((seconds + 120)) "$dir/tests/fuzz/fuzz_$t" "${bounds[@]}" -timeout=10 \
    -rss_limit_mb=2048 -max_len=$maxlen -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $t: ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, no crash"
    summary+=("$t|pass|")
  else
    failed=1
    echo "fuzz $t: FAILED (exit $rc); the log:"
    grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED)' "$log" | tail -60
    for f in "$artifacts"/*; do
      [ -f "$f" ] || continue
      echo "-- reproducer $f ($(stat -c %s "$f") bytes):"
      od -A x -t x1z -v "$f" | head -40
    done
    summary+=("$t|fail|libFuzzer exited $rc; reproducer in $artifacts/, log $log")
  fi
done
write_results
exit $failed
