#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every test egw has: unit and packet tests (GoogleTest, through meson), the test API
# server's own tests, and the end-to-end tests in network namespaces. Installs what is missing
# and builds first. Ends with one line "tests: N passed, M failed" and a non-zero exit on failure.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh || { echo "tests: 0 passed, 1 failed (build)"; exit 1; }

passed=0
failed=0
log_dir=build/test-logs
mkdir -p "$log_dir"

# GoogleTest suites: meson reports one result per test program; count the gtest cases inside.
echo "== unit and packet tests (meson test)"
meson test -C build --suite unit --print-errorlogs --timeout-multiplier 3 2>&1 | tee "$log_dir/meson.txt"
meson_rc=${PIPESTATUS[0]}
for xml in build/meson-logs/testlog.junit.xml; do
  [ -f "$xml" ] || continue
  read -r t f e s < <(python3 - "$xml" <<'PY'
import sys, xml.etree.ElementTree as ET
tests = fails = errs = skips = 0
for tc in ET.parse(sys.argv[1]).getroot().iter('testcase'):
    tests += 1
    if tc.find('failure') is not None: fails += 1
    elif tc.find('error') is not None: errs += 1
    elif tc.find('skipped') is not None: skips += 1
print(tests, fails, errs, skips)
PY
)
  passed=$((passed + t - f - e - s))
  failed=$((failed + f + e))
done
if [ "$meson_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=$((failed + 1)); fi

run_unittest() {  # name, args...
  local name="$1"; shift
  echo "== $name"
  python3 -m unittest "$@" 2>&1 | tee "$log_dir/$name.txt"
  local rc=${PIPESTATUS[0]}
  local ran fails skipped
  read -r ran fails skipped < <(python3 - "$log_dir/$name.txt" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
ran = [int(x) for x in re.findall(r"^Ran (\d+) tests?", text, re.M)]
fail = err = skip = 0
m = re.findall(r"^(?:FAILED|OK) \((.*)\)$", text, re.M)
if m:
    for part in m[-1].split(","):
        k, _, v = part.strip().partition("=")
        if k == "failures": fail = int(v)
        elif k == "errors": err = int(v)
        elif k == "skipped": skip = int(v)
print(ran[-1] if ran else 0, fail + err, skip)
PY
)
  if [ "$rc" -ne 0 ] && [ "$fails" -eq 0 ]; then fails=1; fi
  passed=$((passed + ran - fails - skipped))
  failed=$((failed + fails))
}

if ls tests/apiserver/test_*.py >/dev/null 2>&1; then
  run_unittest apiserver discover -s tests/apiserver -p 'test_*.py' -v
fi
run_unittest e2e -v tests/e2e/test_e2e.py
run_unittest k8s-e2e -v tests/e2e/test_k8s_e2e.py
run_unittest cluster -v tests/e2e/test_cluster.py
run_unittest cli -v tests/e2e/test_cli.py
run_unittest metrics -v tests/e2e/test_metrics.py
run_unittest deploy -v tests/e2e/test_deploy.py

echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
