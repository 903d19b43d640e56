# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""The software pipelining guide's reductions (docs/pallas/pipelining.md) as
written there: a sum over the leading axis with a grid of one int and a
squeezed block dimension, the same sum blocked in 2-D with the reduction
on the last grid axis; and jnp on the host, as the guides use it to build
inputs and check results (NumPy with JAX's default 32-bit dtypes)."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl


def sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(axis=0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


@jax.jit
def sum(x):	# noqa: A001  (the guide's name)
    grid, *out_shape = x.shape
    return pl.pallas_call(
        sum_kernel,
        grid=grid,
        # None in `block_shape` means we pick a size of 1 and squeeze it away
        in_specs=[pl.BlockSpec((None, *out_shape), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec(out_shape, lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct(out_shape, x.dtype),
    )(x)


def blocked_sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(axis=2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


@functools.partial(jax.jit, static_argnames=["b1", "b2"])
def blocked_sum(x, b1, b2):
    g0, *out_shape = x.shape
    g1 = out_shape[0] // b1
    g2 = out_shape[1] // b2
    return pl.pallas_call(
        blocked_sum_kernel,
        grid=(g1, g2, g0),
        in_specs=[pl.BlockSpec((None, b1, b2), lambda i, j, k: (k, i, j))],
        out_specs=pl.BlockSpec((b1, b2), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct(out_shape, x.dtype),
    )(x)


def test_sum_over_the_leading_axis():
    arr = jax.numpy.ones((8, 512, 512))
    assert arr.dtype == np.float32
    assert np.allclose(sum(arr), arr.sum(axis=0))


@pytest.mark.parametrize("b1,b2", [(256, 512), (512, 256), (256, 256)])
def test_blocked_sum_reduces_on_the_last_grid_axis(b1, b2):
    arr = jax.random.normal(jax.random.key(0), (8, 1024, 1024))
    np.testing.assert_allclose(blocked_sum(arr, b1, b2), arr.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_jnp_on_the_host_is_numpy_with_32_bit_defaults():
    x = jnp.reshape(jnp.arange(np.prod((4, 8)), dtype=jnp.int32), (4, 8))
    assert isinstance(x, np.ndarray) and x.dtype == np.int32
    np.testing.assert_array_equal(x, np.arange(32).reshape(4, 8))
    assert jnp.arange(5).dtype == np.int32 and jnp.zeros((2, 3)).dtype == np.float32
    assert jnp.array([1.5]).dtype == np.float32
    assert int(jnp.max(jnp.abs(x - x))) == 0
    np.testing.assert_array_equal(jnp.tril(jnp.ones((3, 3), dtype=jnp.int32)),
                                  np.tril(np.ones((3, 3), np.int32)))


def test_a_host_only_name_in_a_kernel_is_refused():
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.meshgrid(x_ref[...])[0]

    x = np.ones((8, 128), np.float32)
    with pytest.raises(jax.TraceError, match="jnp.meshgrid is not supported in a kernel"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
