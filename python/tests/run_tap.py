#!/usr/bin/env python3
"""Run the amped Python tests (python/tests/test_*.py, unittest) and print
TAP: `1..N`, then `ok`/`not ok` per test method, a skip as
`ok N - name # SKIP reason`, the traceback of a failure as `# ` lines.

    python3 python/tests/run_tap.py [PATTERN]     # e.g. test_interrupt*

The exit status is 1 when a test failed. `python -m unittest discover -s
python/tests` runs the same tests without TAP.
"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


class TapResult(unittest.TestResult):
    """One TAP line per test method, printed when it ends: `not ok` with
    every failure (subtests' included) as `# ` lines, a skip with its reason."""

    def __init__(self):
        super().__init__()
        self.n = 0
        self.failed = 0
        self._errs = []
        self._skip = None

    def _name(self, test):
        doc = test.shortDescription()
        name = f"{type(test).__module__}.{type(test).__name__}.{test._testMethodName}"
        return f"{name}: {doc}" if doc else name

    def _diag(self, text):
        for line in text.rstrip().splitlines():
            print("# " + line)

    def startTest(self, test):
        super().startTest(test)
        self._errs = []
        self._skip = None

    def stopTest(self, test):
        super().stopTest(test)
        self.n += 1
        if self._errs:
            self.failed += 1
            print(f"not ok {self.n} - {self._name(test)}")
            for e in self._errs:
                self._diag(e)
        elif self._skip is not None:
            print(f"ok {self.n} - {self._name(test)} # SKIP {self._skip}")
        else:
            print(f"ok {self.n} - {self._name(test)}")

    def addSuccess(self, test):
        pass

    def addSkip(self, test, reason):
        self._skip = reason

    def addFailure(self, test, err):
        self._errs.append(self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self._errs.append(self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        if err is not None:
            if issubclass(err[0], unittest.SkipTest):
                return
            self._errs.append(f"{subtest.id()}:\n" + self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        pass

    def addUnexpectedSuccess(self, test):
        self._errs.append("unexpected success")


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    suite = loader.discover(HERE, pattern=pattern, top_level_dir=HERE)
    tests = list(flatten(suite))
    # A module that fails to import comes back as a _FailedTest: one line each.
    print(f"1..{len(tests)}", flush=True)
    result = TapResult()
    t0 = time.monotonic()
    for test in tests:
        t1 = time.monotonic()
        test(result)
        sys.stdout.flush()
        dt = time.monotonic() - t1
        if dt > 5:
            print(f"# {test.id()}: {dt:.1f} s")
    print(f"# {result.n} tests, {result.failed} failed, {time.monotonic() - t0:.1f} s")
    if result.n != len(tests):
        print(f"# planned {len(tests)} tests but ran {result.n}")
        return 1
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
