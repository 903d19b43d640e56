# SPDX-License-Identifier: MIT
"""A kernel's MosaicError, raised with a traceback that ends at the
kernel's own lines, is shown by pytest as any failure: a test file whose
kernel helper sits above line 200 and whose failing statement (a lambda)
sits below it once made pytest's source lookup fail (an INTERNALERROR that
ended the whole run). Run in a pytest of its own, in a subprocess."""
import os
import subprocess
import sys

_HEAD = '''
import numpy as np
import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl


def _run(fn, x):
    def kernel(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((131072, 2), jnp.float32))(x)
'''

_TAIL = '''
def test_refused():
    _run(lambda v: v.reshape(131072, 2), np.zeros((262144,), np.float32))


def test_after():
    pass
'''


def test_a_kernel_error_is_a_plain_failure(tmp_path):
    f = tmp_path / "test_kernel_error.py"
    f.write_text(_HEAD + "\n" * 300 + _TAIL)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(f)], cwd=tmp_path, env=dict(os.environ), capture_output=True,
                       text=True, timeout=120)
    assert "INTERNALERROR" not in r.stdout + r.stderr, r.stdout[-3000:]
    assert "1 failed, 1 passed" in r.stdout, r.stdout[-3000:]
    assert "MosaicError" in r.stdout and "v.reshape(131072, 2)" in r.stdout, r.stdout[-3000:]
