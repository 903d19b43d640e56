#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Every sample in this folder (or those named) in one python3 process, so
# NumPy and tpuemu are imported once: under TCG in the VM, each python3
# start costs seconds. Each sample's own output, its time, then one TAP
# result for it ("ok N - py/NAME.py"), after a plan; exits 1 if any failed
# (a FAIL, an exception: its traceback as "# " lines).
# Run: TPURT_DEVICE=sim /usr/bin/python3 samples/py/run_all.py [NAME...]
import glob
import importlib.util
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def samples(names):
    if names:
        return [os.path.join(HERE, n if n.endswith(".py") else n + ".py") for n in names]
    return sorted(p for p in glob.glob(os.path.join(HERE, "*.py"))
                  if os.path.basename(p) != os.path.basename(__file__))


def run(path):
    """The sample's main() result: 0 for PASS."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location("sample_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main()


def main(argv):
    paths = samples(argv[1:])
    print("1..%d" % len(paths), flush=True)
    failed = 0
    for n, path in enumerate(paths, 1):
        what = "py/" + os.path.basename(path)
        start = time.monotonic()
        try:
            rc = run(path)
            why = "" if rc == 0 else ": exit %s" % rc
        except Exception:
            for line in traceback.format_exc().splitlines():
                print("# " + line)
            why = ": an exception"
        sys.stdout.flush()
        print("# %s: %.2f s" % (what, time.monotonic() - start))
        print("%s %d - %s%s" % ("not ok" if why else "ok", n, what, why), flush=True)
        failed += bool(why)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
