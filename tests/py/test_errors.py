# SPDX-License-Identifier: MIT
"""What cannot be traced raises a clear exception naming the kernel's line."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl


def _call(k, n_in=1):
    x = np.zeros((8, 128), dtype=np.float32)
    return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(*[x] * n_in)


def test_python_if_on_traced_value():
    def k(x_ref, o_ref):
        if pl.program_id(0) == 0:  # the line the error names
            o_ref[...] = x_ref[...]

    with pytest.raises(pl.TraceError) as e:
        _call(k)
    msg = str(e.value)
    assert "Python control flow on a traced value" in msg
    assert "pl.when" in msg
    assert "test_errors.py" in msg and "if pl.program_id(0) == 0:  # the line the error names" in msg


def test_python_int_of_traced_value():
    def k(x_ref, o_ref):
        for _ in range(pl.program_id(0)):
            o_ref[...] = x_ref[...]

    with pytest.raises(pl.TraceError, match="used as a Python integer"):
        _call(k)


def test_store_into_input():
    def k(x_ref, o_ref):
        x_ref[...] = o_ref[...]

    with pytest.raises(pl.TraceError, match=r"store into input 'x_ref'(.|\n)*x_ref\[...\] = o_ref"):
        _call(k)


def test_library_error_names_python_line():
    # a dtype mismatch the statement syntax refuses: the error carries
    # libtpurt's message and the Python line that produced the statement
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(jnp.bfloat16)

    with pytest.raises(pl.TraceError) as e:
        _call(k)
    msg = str(e.value)
    assert "statement 1" in msg
    assert "traced from" in msg and "o_ref[...] = x_ref[...].astype(jnp.bfloat16)" in msg


def test_unsupported_operand():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + np.ones((8, 128))

    with pytest.raises(pl.TraceError, match="cannot use"):
        _call(k)


def test_wrong_ref_count():
    def k(x_ref, o_ref, extra_ref):
        o_ref[...] = x_ref[...]

    with pytest.raises(TypeError, match="takes 3 refs, pallas_call gives 2"):
        _call(k)
