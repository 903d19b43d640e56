# SPDX-License-Identifier: MIT
"""pl.debug_check and pl.enable_debug_checks: off, a debug_check is
nothing; on, its condition is checked on the device and the first failure
(in grid order) raised when the call returns, or given to a running
checkify.checkify (JAX's test_check, Mosaic GPU's, ported to the TPU)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.experimental import checkify


def _call(x, grid=()):
    def kernel(x_ref, o_ref):
        pl.debug_check(jnp.sum(x_ref[...]) > 0, "x.sum() is not positive {here}")
        o_ref[...] = x_ref[...]
    spec = pl.BlockSpec((8, 128), lambda *i: (0, 0)) if grid else None
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=grid, in_specs=[spec] if grid else None,
                          out_specs=spec)(x)


def test_check_passes_and_fails():
    x = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)
    with pl.enable_debug_checks(True):
        assert pl.enable_debug_checks.value is True
        np.testing.assert_array_equal(_call(x), x)
        with pytest.raises(checkify.JaxRuntimeError, match=r"x.sum\(\) is not positive \{here\}"):
            _call(-x, grid=(3,))
    assert pl.enable_debug_checks.value is False
    np.testing.assert_array_equal(_call(-x), -x)		# off: nothing checked


def test_goes_to_a_running_checkify():
    x = -np.ones((8, 128), np.int32)
    with pl.enable_debug_checks():
        err, out = checkify.checkify(_call)(x)
    assert "x.sum() is not positive" in err.get()
    np.testing.assert_array_equal(out, x)


def test_on_the_host_and_refusals():
    with pl.enable_debug_checks():
        pl.debug_check(True, "fine")
        with pytest.raises(checkify.JaxRuntimeError, match="host check"):
            pl.debug_check(np.array([1, 0]), "host check")
    pl.debug_check(False, "off: nothing")
    with pytest.raises(TypeError, match="must be a str"):
        pl.debug_check(True, 3)
