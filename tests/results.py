# SPDX-License-Identifier: Apache-2.0
"""The counting half of scripts/test.sh: every suite leaves one JSON file of results in a
directory, this turns GoogleTest's results into such a file and adds them all up.

    python3 tests/results.py junit  NAME MESON_JUNIT.xml MESON_RC OUT.json
    python3 tests/results.py fail   NAME REASON OUT.json       (a step that failed as a whole)
    python3 tests/results.py pass   NAME OUT.json              (a step that passed as a whole)
    python3 tests/results.py total  DIR

A result file: {"suite", "passed": N, "failed": [{"id", "reason"}], "skipped": [{"id", "reason"}]}.

`total` lists every failed and every skipped test with its reason and ends with the line
`tests: N passed, M failed, S skipped`. Under CI=true a skip is a failure: it is listed and
counted as failed. Exit status 1 when anything failed.
"""

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def junit(name, xml_path, meson_rc, out):
    """meson's junit file holds, for a gtest-protocol test, every GoogleTest case."""
    res = {"suite": name, "passed": 0, "failed": [], "skipped": []}
    programs_failed = 0
    try:
        root = ET.parse(xml_path).getroot()
    except (OSError, ET.ParseError) as e:
        root = None
        res["failed"].append({"id": f"{name} (junit)", "reason": f"no readable {xml_path}: {e}"})
    cases = 0
    for suite in (root.iter("testsuite") if root is not None else []):
        for tc in suite.findall("testcase"):
            cases += 1
            tid = f"{suite.get('name')}::{tc.get('classname', '')}.{tc.get('name')}".replace("::.", "::")
            bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
            skip = tc.find("skipped")
            if bad is not None:
                msg = (bad.get("message") or bad.text or "failed").strip().splitlines()
                res["failed"].append({"id": tid, "reason": msg[0] if msg else "failed"})
                programs_failed += 1
            elif skip is not None or tc.get("result") == "skipped":
                msg = ((skip.get("message") if skip is not None else None) or
                       (skip.text if skip is not None else None) or "skipped").strip().splitlines()
                # GoogleTest puts "file:line\n<message>" into the message: keep the message.
                res["skipped"].append({"id": tid, "reason": msg[-1] if msg else "skipped"})
            else:
                res["passed"] += 1
    if int(meson_rc) != 0 and programs_failed == 0:
        # A program that crashed or failed outside any test case (a sanitizer report at exit,
        # a failing global set-up) leaves no failed case behind: it still fails the run.
        res["failed"].append({"id": f"{name} (meson test)",
                              "reason": f"meson test exited {meson_rc}; see the log above"})
    if cases == 0 and not res["failed"]:
        res["failed"].append({"id": f"{name} (suite)", "reason": "no test case ran"})
    Path(out).write_text(json.dumps(res, indent=1) + "\n")


def step_passed(name, out):
    Path(out).write_text(json.dumps({"suite": name, "passed": 1, "failed": [], "skipped": []}) + "\n")


def fail(name, reason, out):
    Path(out).write_text(json.dumps({"suite": name, "passed": 0, "skipped": [],
                                     "failed": [{"id": name, "reason": reason}]}, indent=1) + "\n")


def total(directory):
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    passed, failed, skipped = 0, [], []
    files = sorted(Path(directory).glob("*.json"))
    for f in files:
        r = json.loads(f.read_text())
        passed += r["passed"]
        failed += [(r["suite"], x) for x in r["failed"]]
        skipped += [(r["suite"], x) for x in r["skipped"]]
    if ci:
        failed += [(s, {"id": x["id"], "reason": "skipped, and under CI=true a skip is a failure: " + x["reason"]})
                   for s, x in skipped]
        skipped = []
    print("\n== summary")
    for f in files:
        r = json.loads(f.read_text())
        print(f"  {r['suite']:<24} {r['passed']:>4} passed {len(r['failed']):>3} failed "
              f"{len(r['skipped']):>3} skipped" + (f"  ({r['seconds']}s)" if "seconds" in r else ""))
    if skipped:
        print(f"skipped ({len(skipped)}):")
        for s, x in skipped:
            print(f"  SKIP [{s}] {x['id']}: {x['reason']}")
    if failed:
        print(f"failed ({len(failed)}):")
        for s, x in failed:
            print(f"  FAIL [{s}] {x['id']}: {x['reason']}")
    print(f"tests: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


def main(argv):
    if len(argv) == 6 and argv[1] == "junit":
        junit(*argv[2:])
        return 0
    if len(argv) == 5 and argv[1] == "fail":
        fail(*argv[2:])
        return 0
    if len(argv) == 4 and argv[1] == "pass":
        step_passed(*argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "total":
        return total(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
