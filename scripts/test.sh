#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every test egw has: unit and packet tests (GoogleTest, through meson), short libFuzzer
# runs of the fuzz targets, the test API server's own tests, and the end-to-end tests in network
# namespaces. Installs what is missing
# and builds first.
#
# Every suite leaves its counts in build/test-results/ (tests/run_suite.py for Python suites,
# tests/results.py for GoogleTest's junit file); the run ends with every failed and skipped test
# and its reason, then one line "tests: N passed, M failed, S skipped", and exits non-zero when
# anything failed. A suite that runs no test fails. Under CI=true every skip is a failure too.
set -uo pipefail
cd "$(dirname "$0")/.."
# The tests run on Debian's python3, whose modules scripts/deps.sh installs, and Debian's tools,
# not on whatever python3 comes first in the caller's PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

results=build/test-results
logs=build/test-logs
step=0
started=$SECONDS

# The wall time of every step, listed at the end: docs/testing.md keeps a table of them, and CI's
# 90-minute limit is judged by it.
step_label="" step_started=$SECONDS
timing() {  # label of the step that starts now ("" when the last one ends)
  [ -n "$step_label" ] && printf '  %-14s %5d s\n' "$step_label" $((SECONDS - step_started)) >>"$logs/durations.txt"
  step_label=$1 step_started=$SECONDS
}

finish() {
  timing ""
  echo "== durations"
  cat "$logs/durations.txt" 2>/dev/null
  echo "== test.sh took $((SECONDS - started)) s"
  python3 tests/results.py total "$results"
  exit $?
}

next_result() {  # label: sets $out to the next result file, in run order
  step=$((step + 1))
  printf -v out '%s/%03d-%s.json' "$results" "$step" "$1"
}

step_failed() {  # label, reason
  next_result "$1"
  python3 tests/results.py fail "$1" "$2" "$out"
}

# GoogleTest suites of one build directory, counted case by case from meson's junit file.
gtest_suites() {  # label, build dir, extra meson test arguments...
  local label=$1 dir=$2
  shift 2
  timing "$label"
  echo "== $label: unit and packet tests (meson test -C $dir)"
  rm -f "$dir/meson-logs/testlog.junit.xml"
  meson test -C "$dir" --suite unit --print-errorlogs --timeout-multiplier 3 "$@" 2>&1 | tee "$logs/$label.txt"
  local rc=${PIPESTATUS[0]}
  next_result "$label"
  python3 tests/results.py junit "$label" "$dir/meson-logs/testlog.junit.xml" "$rc" "$out"
}

# One Python unittest suite through tests/run_suite.py, bounded in time.
py_suite() {  # label, targets...
  local label=$1 out
  shift
  timing "$label"
  next_result "$label"
  echo "== $label"
  timeout --kill-after=30 1800 python3 tests/run_suite.py --summary "$out" "$label" "$@" 2>&1 | tee "$logs/$label.txt"
  [ -f "$out" ] || python3 tests/results.py fail "$label" "the suite's runner died or timed out (see $logs/$label.txt)" "$out"
}

rm -rf "$results"
mkdir -p "$results" "$logs"
rm -f "$logs/durations.txt"
timing deps

# What the lint and the build need (scripts/lint.sh checks the format with clang-format-14);
# scripts/build.sh runs it again, which then finds nothing missing.
if ! bash scripts/deps.sh; then
  step_failed deps "scripts/deps.sh failed"
  finish
fi

# Lint (scripts/lint.sh): SPDX lines everywhere, a data plane that never includes control/,
# counters bumped with count() and every C++ file as clang-format leaves it.
timing lint
next_result lint
echo "== lint"
if bash scripts/lint.sh 2>&1 | tee "$logs/lint.txt"; then
  python3 tests/results.py pass lint "$out"
else
  python3 tests/results.py fail lint "scripts/lint.sh found problems (see $logs/lint.txt)" "$out"
fi

timing build
if ! bash scripts/build.sh; then
  step_failed build "scripts/build.sh failed"
  finish
fi

# What a test may leave behind, listed now and again at the end (the step "leftovers"): DPDK's
# runtime directories (each several MiB of tmpfs, that is memory, which DPDK does not remove when
# a process ends) and network namespaces. One that appears during the run and is still there at
# its end is a test that did not clean up after itself.
if [ "$(id -u)" -eq 0 ]; then dpdk_runtime=/var/run/dpdk; else dpdk_runtime=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
leftovers() {
  { find "$dpdk_runtime" -mindepth 1 -maxdepth 1 -printf '%p\n' 2>/dev/null
    ip netns list 2>/dev/null | awk '{ print "network namespace " $1 }'; } | sort
}
before_tests=$(leftovers)

gtest_suites unit build

# Fuzzing (scripts/fuzz.sh, docs/testing.md): the corpus replays ran above among the unit tests;
# here each libFuzzer target of a clang build runs for FUZZ_TIME seconds (20 by default), one test
# per target. A crash, a sanitizer report or a timeout fails it, with the reproducer in the log.
timing fuzz
next_result fuzz
echo "== fuzz"
# Under CI the run is repeatable (docs/testing.md): 30,000 inputs per target from seed 1, capped
# at 60 s, so a submission is judged on the inputs it was tried with here, not on a new random draw.
if [ "${CI:-}" = true ]; then
  export FUZZ_RUNS=${FUZZ_RUNS:-30000} FUZZ_SEED=${FUZZ_SEED:-1} FUZZ_TIME=${FUZZ_TIME:-60}
fi
FUZZ_TIME=${FUZZ_TIME:-20} timeout --kill-after=30 2400 bash scripts/fuzz.sh --results "$out" 2>&1 | tee "$logs/fuzz.txt"
[ -f "$out" ] || python3 tests/results.py fail fuzz "scripts/fuzz.sh died or timed out (see $logs/fuzz.txt)" "$out"
py_suite apiserver discover:tests/apiserver:test_*.py
py_suite e2e tests/e2e/test_e2e.py
py_suite e2e-cases tests/e2e/test_cases_e2e.py
py_suite mtu tests/e2e/test_mtu_e2e.py
py_suite firewall tests/e2e/test_firewall_e2e.py
py_suite ipv6 tests/e2e/test_ipv6_e2e.py
py_suite vlan tests/e2e/test_vlan_e2e.py
py_suite egress-qos tests/e2e/test_egress_qos_e2e.py
py_suite traffic tests/e2e/test_traffic.py
py_suite k8s-e2e tests/e2e/test_k8s_e2e.py
py_suite cluster tests/e2e/test_cluster.py
py_suite cli tests/e2e/test_cli.py
py_suite sync tests/e2e/test_sync.py
py_suite metrics tests/e2e/test_metrics.py
py_suite deploy tests/e2e/test_deploy.py
py_suite flags tests/e2e/test_flags.py
py_suite confinement tests/e2e/test_confinement.py

# --- the same tests on sanitized binaries --------------------------------------------------------
# build-asan: AddressSanitizer + UndefinedBehaviorSanitizer (meson.build makes every report fatal),
# -O1 -g1 and no benchmarks, chosen for compile time. Every instrumented process, including the
# egwd processes the end-to-end suites start, writes its report to a file under $san_reports
# (log_path), so a report fails the run even where a test would not notice the process died.
# -Werror is the release build's (scripts/build.sh under CI): gcc's warnings change with
# instrumentation and -O1 (more -Wmaybe-uninitialized guesses), which says nothing about the code.
#
# EGW_SANITIZERS lists the sanitized runs to make: "asan", "tsan", both, or none. Under CI=true
# both run unless it says otherwise (each was seen with zero reports: the GoogleTest suites and
# both e2e suites under ASan + UBSan, test_dataplane_threads under TSan once the workers' counters
# became relaxed atomic stores; docs/testing.md, "Sanitizers"). Outside CI none runs, so a
# developer's run stays short.
if [ -z "${EGW_SANITIZERS+set}" ] && [ "${CI:-}" = true ]; then
  EGW_SANITIZERS="asan tsan"
fi
sanitizers=" ${EGW_SANITIZERS-} "
san_reports=$PWD/$logs/sanitizer-reports
rm -rf "$san_reports"
mkdir -p "$san_reports"

sanitized_build() {  # build dir, b_sanitize value, targets... (none: all)
  local dir=$1 sanitize=$2
  shift 2
  timing "$dir"
  echo "== $dir: building with -Db_sanitize=$sanitize"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=plain -Doptimization=1 -Dcpp_args=-g1 -Db_sanitize="$sanitize" \
      -Dbench=false >"$logs/$dir-setup.txt" 2>&1 || { cat "$logs/$dir-setup.txt"; return 1; }
  fi
  ninja -C "$dir" "$@"
}

# Turns every report file that appeared since the last call into a failed test of `label`.
sanitizer_reports() {  # label
  local f first
  for f in "$san_reports"/*.*; do
    [ -f "$f" ] || continue
    echo "== $1: sanitizer report $(basename "$f")"
    cat "$f"
    first=$(grep -m1 -E 'SUMMARY:|runtime error:|ERROR: (Address|Leak|Thread)Sanitizer' "$f" || head -1 "$f")
    step_failed "$1" "sanitizer report $(basename "$f"): $first"
    mkdir -p "$san_reports/seen"
    mv "$f" "$san_reports/seen/$1-$(basename "$f")"
  done
}

if [[ $sanitizers != *" asan "* ]]; then
  echo "== build-asan: not run (EGW_SANITIZERS=\"${sanitizers# }\")"
elif sanitized_build build-asan address,undefined; then
  export ASAN_OPTIONS="log_path=$san_reports/asan:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
  export UBSAN_OPTIONS="log_path=$san_reports/ubsan:halt_on_error=1:print_stacktrace=1"
  gtest_suites asan-unit build-asan --no-rebuild
  sanitizer_reports asan-unit
  EGW_BUILD_DIR=build-asan py_suite asan-e2e tests/e2e/test_e2e.py
  sanitizer_reports asan-e2e
  EGW_BUILD_DIR=build-asan py_suite asan-k8s-e2e tests/e2e/test_k8s_e2e.py
  sanitizer_reports asan-k8s-e2e
  unset ASAN_OPTIONS UBSAN_OPTIONS
else
  step_failed build-asan "the AddressSanitizer build failed"
fi

# build-tsan: ThreadSanitizer on what runs concurrently: workers on their own threads while the
# control thread publishes policies with RCU, rewrites neighbours and reads counters
# (tests/unit/dataplane/test_concurrency.cpp), and a worker's session sync event ring between its
# producer and consumer threads (test_sync_events.cpp), and the sync thread between two gateways
# (tests/unit/sync/test_transport.cpp), and the DNS resolver's thread beside its owner
# (tests/unit/dns/test_resolver.cpp). Only those programs are built. meson.build makes
# DPDK's inline ring code use its C11 memory model there and the packet rig states the net_ring
# PMD's hand-off (tests/unit/dataplane/rig.cpp), so TSan sees the orderings the rings provide.
if [[ $sanitizers != *" tsan "* ]]; then
  echo "== build-tsan: not run (EGW_SANITIZERS=\"${sanitizers# }\")"
elif sanitized_build build-tsan thread tests/unit/dataplane/test_dataplane_threads tests/unit/dataplane/test_sync_events \
  tests/unit/sync/test_sync_transport tests/unit/dns/test_dns_resolver; then
  export TSAN_OPTIONS="log_path=$san_reports/tsan:halt_on_error=1:history_size=7:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp"
  gtest_suites tsan-threads build-tsan --no-rebuild dataplane-threads sync-events sync-transport dns-resolver
  sanitizer_reports tsan-threads
  unset TSAN_OPTIONS
else
  step_failed build-tsan "the ThreadSanitizer build failed"
fi

timing leftovers
next_result leftovers
left=$(comm -13 <(echo "$before_tests") <(leftovers) | paste -sd, - | sed 's/,/, /g')
if [ -z "$left" ]; then
  python3 tests/results.py pass leftovers "$out"
else
  echo "== leftovers: $left"
  python3 tests/results.py fail leftovers "the tests left behind: $left" "$out"
fi

finish
