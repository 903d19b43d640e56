# SPDX-License-Identifier: MIT
"""checkify.check in kernels and on the host, beyond JAX's ports
(test_jax_ports21.py): which failure is reported, what passes, and what
is refused."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.experimental import checkify


def _grid_call(kernel, grid=(4,)):
    return pl.pallas_call(kernel, grid=grid,
                          in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))


def test_passing_checks_give_no_error():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
        checkify.check(jnp.all(o_ref[...] > x_ref[...]), "never {i}", i=pl.program_id(0))

    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    err, out = checkify.checkify(_grid_call(kernel))(x)
    assert err.get() is None
    err.throw()
    np.testing.assert_array_equal(out, x + 1)


def test_the_first_failure_in_grid_order_is_reported():
    """Two checks: the second fails at steps 1 and 3, the first at step 2;
    step 1's failure (the second check) is the one reported."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        i = pl.program_id(0)
        checkify.check(i != 2, "first check at {}", i)
        checkify.check(jnp.all(x_ref[...] < 1000.0) | (i % 2 == 0), "second check at {s}", s=i)

    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    err, out = checkify.checkify(_grid_call(kernel))(x)
    assert err.get() == "second check at 1"
    with pytest.raises(checkify.JaxRuntimeError, match="second check at 1"):
        err.throw()
    np.testing.assert_array_equal(out, x)


def test_an_array_predicate_needs_all_of_it():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        checkify.check(x_ref[...] != 77.0, "a 77 in block {}", pl.program_id(0))

    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128) % 100
    x[:16] = 0
    err, _ = checkify.checkify(_grid_call(kernel))(x)
    assert err.get() == "a 77 in block 2"


def test_a_kernel_check_outside_checkify_is_refused():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        checkify.check(pl.program_id(0) < 2, "late")

    with pytest.raises(jax.TraceError, match="under checkify.checkify"):
        _grid_call(kernel)(np.zeros((32, 128), np.float32))


def test_a_float_format_argument_is_refused():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        checkify.check(pl.program_id(0) < 2, "x {}", jnp.sum(x_ref[...]))

    with pytest.raises(jax.TraceError, match="format argument 0"):
        checkify.checkify(_grid_call(kernel))(np.zeros((32, 128), np.float32))


def test_host_checks():
    """On the host: raised at once outside checkify, the first recorded
    inside it."""
    with pytest.raises(checkify.JaxRuntimeError, match="bad 3"):
        checkify.check(np.array([True, False]), "bad {}", 3)

    def f(x):
        checkify.check(x > 0, "x is {}", x)
        checkify.check(x > 1, "x is small: {}", x)
        return x * 2
    err, out = checkify.checkify(f)(np.int32(-4))
    assert err.get() == "x is -4" and out == -8
    err, out = checkify.checkify(f)(np.int32(5))
    assert err.get() is None
    with pytest.raises(NotImplementedError, match="user checks"):
        checkify.checkify(f, errors=checkify.all_checks)
