#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every test egw has: unit and packet tests (GoogleTest, through meson), the test API
# server's own tests, and the end-to-end tests in network namespaces. Installs what is missing
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

finish() {
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
  next_result "$label"
  echo "== $label"
  timeout --kill-after=30 1800 python3 tests/run_suite.py --summary "$out" "$label" "$@" 2>&1 | tee "$logs/$label.txt"
  [ -f "$out" ] || python3 tests/results.py fail "$label" "the suite's runner died or timed out (see $logs/$label.txt)" "$out"
}

rm -rf "$results"
mkdir -p "$results" "$logs"

if ! bash scripts/build.sh; then
  step_failed build "scripts/build.sh failed"
  finish
fi

gtest_suites unit build
py_suite apiserver discover:tests/apiserver:test_*.py
py_suite e2e tests/e2e/test_e2e.py
py_suite e2e-cases tests/e2e/test_cases_e2e.py
py_suite traffic tests/e2e/test_traffic.py
py_suite k8s-e2e tests/e2e/test_k8s_e2e.py
py_suite cluster tests/e2e/test_cluster.py
py_suite cli tests/e2e/test_cli.py
py_suite metrics tests/e2e/test_metrics.py
py_suite deploy tests/e2e/test_deploy.py

finish
