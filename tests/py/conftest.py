# SPDX-License-Identifier: MIT
# The Python front end's tests: the in-process device, the tree's package,
# and (TPUEMU_TAP=1, as tests/python_test.sh runs them) TAP output: a plan,
# one result per test, a failure's report as "# " comments.
import os
import sys

os.environ.setdefault("TPURT_DEVICE", "sim")
_top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_top, "python"))

_tap = os.environ.get("TPUEMU_TAP") == "1"
_n = 0


def pytest_collection_finish(session):
    if _tap:
        print("1..%d" % len(session.items), flush=True)


def pytest_runtest_logreport(report):
    global _n
    if not _tap:
        return
    if report.when == "call" or (report.when == "setup" and (report.failed or report.skipped)):
        _n += 1
        name = report.nodeid
        if report.passed:
            print("ok %d - %s" % (_n, name), flush=True)
        elif report.skipped:
            print("ok %d - %s # SKIP" % (_n, name), flush=True)
        else:
            print("not ok %d - %s" % (_n, name), flush=True)
            for line in str(report.longrepr).splitlines():
                print("# " + line, flush=True)
    elif report.when == "teardown" and report.failed:
        _n += 1
        print("not ok %d - %s (teardown)" % (_n, report.nodeid), flush=True)
