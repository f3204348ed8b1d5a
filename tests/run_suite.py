# SPDX-License-Identifier: Apache-2.0
"""Runs one Python unittest suite and counts it honestly for scripts/test.sh.

    python3 tests/run_suite.py --summary OUT.json NAME TARGET... [-k PATTERN]...

TARGET is a test file (tests/e2e/test_e2e.py), a dotted name, or `discover:DIR:PATTERN`.
The run is printed as `python3 -m unittest -v` prints it. OUT.json receives the counts and, for
every test that did not pass, its id and reason:

    {"suite": NAME, "passed": N, "failed": [{"id", "reason"}], "skipped": [{"id", "reason"}]}

What `unittest` alone gets wrong and this runner counts instead:
- a SkipTest raised in setUpClass (or setUpModule) is one "skip" for unittest and zero tests run;
  here every test of that class (or module) counts as skipped, with the reason;
- an error in setUpClass / setUpModule is one error for unittest; here every test of that class
  counts as failed, with the error;
- a suite that collects no test at all is a failure, not "Ran 0 tests OK";
- an unexpected success is a failure.
Exit status: 0 when nothing failed (skips are the caller's to judge), 1 otherwise.
"""

import argparse
import json
import sys
import time
import traceback
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load(loader, target):
    if target.startswith("discover:"):
        _, start, pattern = target.split(":", 2)
        return loader.discover(start_dir=start, pattern=pattern, top_level_dir=start)
    if target.endswith(".py"):
        path = Path(target).resolve()
        if path.is_relative_to(REPO):
            target = ".".join(path.relative_to(REPO).with_suffix("").parts)
        else:
            sys.path.insert(0, str(path.parent))
            target = path.stem
    return loader.loadTestsFromName(target)


def tests_of(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from tests_of(t)
        else:
            yield t


def first_line(text):
    lines = [l for l in str(text).strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no message)"


class CountingResult(unittest.TextTestResult):
    """TextTestResult that also keeps, per test id, what happened to it."""

    def __init__(self, *a, all_tests=(), **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}  # id -> ("pass" | "fail" | "skip", reason)
        self.by_class = {}
        self.by_module = {}
        for t in all_tests:
            cls = type(t)
            self.by_class.setdefault(f"{cls.__module__}.{cls.__qualname__}", []).append(t.id())
            self.by_module.setdefault(cls.__module__, []).append(t.id())

    def _holder_targets(self, test):
        """The test ids a setUpClass/setUpModule/tearDown* failure or skip stands for."""
        desc = getattr(test, "description", None)
        if desc is None:  # a real test
            return [test.id()]
        # _ErrorHolder descriptions: "setUpClass (module.Class)", "setUpModule (module)".
        name = desc[desc.find("(") + 1:desc.rfind(")")] if "(" in desc else desc
        if desc.startswith(("setUpClass", "tearDownClass")):
            return self.by_class.get(name, [desc])
        if desc.startswith(("setUpModule", "tearDownModule")):
            return self.by_module.get(name, [desc])
        return [desc]

    def _mark(self, test, kind, reason):
        for tid in self._holder_targets(test):
            # A tearDownClass failure after tests passed turns them into failures: the class
            # as a whole did not hold.
            prev = self.outcomes.get(tid)
            if prev and prev[0] == "fail":
                continue
            self.outcomes[tid] = (kind, reason)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._mark(test, "pass", "")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._mark(test, "fail", first_line(self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        super().addError(test, err)
        self._mark(test, "fail", first_line(self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._mark(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._mark(test, "pass", "")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._mark(test, "fail", "unexpected success of a test marked expectedFailure")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._mark(test, "fail", f"{subtest.id()}: " + first_line(self._exc_info_to_string(err, test)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summary", required=True, help="where to write the JSON counts")
    ap.add_argument("-k", dest="patterns", action="append", default=None,
                    help="only tests whose name contains this (as unittest -k)")
    ap.add_argument("name")
    ap.add_argument("targets", nargs="+")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in args.patterns]
    summary = {"suite": args.name, "passed": 0, "failed": [], "skipped": []}
    try:
        suite = unittest.TestSuite(load(loader, t) for t in args.targets)
    except Exception:
        summary["failed"].append({"id": f"{args.name} (loading)", "reason": first_line(traceback.format_exc())})
        traceback.print_exc()
        suite = unittest.TestSuite()
    all_tests = list(tests_of(suite))
    # A module that fails to import shows up as a _FailedTest: it counts as a failed test below.

    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2,
                                     resultclass=lambda *a, **kw: CountingResult(*a, all_tests=all_tests, **kw))
    start = time.monotonic()
    result = runner.run(suite)
    elapsed = time.monotonic() - start

    for t in all_tests:
        result.outcomes.setdefault(t.id(), ("fail", "never ran (an earlier error stopped its class)"))
    for tid, (kind, reason) in sorted(result.outcomes.items()):
        if kind == "pass":
            summary["passed"] += 1
        elif kind == "skip":
            summary["skipped"].append({"id": tid, "reason": reason})
        else:
            summary["failed"].append({"id": tid, "reason": reason})
    if not all_tests and not summary["failed"]:
        summary["failed"].append({"id": f"{args.name} (suite)", "reason": "the suite collected no test"})
    summary["seconds"] = round(elapsed, 1)
    Path(args.summary).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{args.name}: {summary['passed']} passed, {len(summary['failed'])} failed, "
          f"{len(summary['skipped'])} skipped ({elapsed:.1f}s)", file=sys.stderr)
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
