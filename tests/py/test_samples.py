# SPDX-License-Identifier: MIT
"""Each sample in samples/py passes on the in-process device (the VM runs
them too, through samples/py/run_all.py)."""
import glob
import importlib.util
import os

import pytest

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "py")
PATHS = sorted(p for p in glob.glob(os.path.join(SAMPLES, "*.py"))
               if os.path.basename(p) != "run_all.py")


@pytest.mark.parametrize("path", PATHS, ids=[os.path.basename(p) for p in PATHS])
def test_sample_passes(path, capsys):
    spec = importlib.util.spec_from_file_location("sample_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main()
    out = capsys.readouterr().out
    assert rc == 0 and out.rstrip().endswith("PASS"), out


def test_run_all_sees_every_sample():
    spec = importlib.util.spec_from_file_location("run_all", os.path.join(SAMPLES, "run_all.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert [os.path.abspath(p) for p in mod.samples([])] == [os.path.abspath(p) for p in PATHS]
    assert len(PATHS) >= 6
