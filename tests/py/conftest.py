# SPDX-License-Identifier: MIT
# The Python front end's tests: the in-process device, the tree's package,
# and (TPUEMU_TAP=1, as tests/python_test.sh runs them) TAP output: a plan,
# one result per test, a failure's report as "# " comments; with
# TPUEMU_TAP_FD=N on descriptor N).
import os
import sys

os.environ.setdefault("TPURT_DEVICE", "sim")
_top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_top, "python"))

_tap = os.environ.get("TPUEMU_TAP") == "1"
_n = 0
_out = sys.stdout
if _tap and os.environ.get("TPUEMU_TAP_FD"):
    # TAP on its own descriptor, pytest's report elsewhere (stderr)
    _out = os.fdopen(int(os.environ["TPUEMU_TAP_FD"]), "w", buffering=1)


def _say(line):
    _out.write(line + "\n")
    _out.flush()


def pytest_collection_finish(session):
    if _tap:
        _say("1..%d" % len(session.items))


def pytest_runtest_logreport(report):
    global _n
    if not _tap:
        return
    if report.when == "call" or (report.when == "setup" and (report.failed or report.skipped)):
        _n += 1
        name = report.nodeid
        if report.passed:
            _say("ok %d - %s" % (_n, name))
        elif report.skipped:
            _say("ok %d - %s # SKIP" % (_n, name))
        else:
            _say("not ok %d - %s" % (_n, name))
            for line in str(report.longrepr).splitlines():
                _say("# " + line)
    elif report.when == "teardown" and report.failed:
        _n += 1
        _say("not ok %d - %s (teardown)" % (_n, report.nodeid))
