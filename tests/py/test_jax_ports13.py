# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/pallas_vmap_test.py (PallasCallVmapTest):
jax.vmap of pallas_call with in_axes None, double and quadruple vmaps,
kernels with a grid, slicing kernels, different in and out axes,
input_output_aliases under vmap, the hoisted-constants error, and the
(4, 65536, 2) and (2, 2, 65536, 2) vmaps of a 2-element kernel. Only the
imports are changed; intx and floatx are int32 and float32 (JAX without
x64). PallasCallVmapInterpretTest (the same tests, interpret=True) is left
out: tpuemu has no interpret mode to tell apart. The 0-d operands of
the simple kernels travel as (1,) arrays (pallas/_zero_d.py); a vmap of a
pallas_call is one call with the batch as a leading grid dimension
(pallas/_batch.py), so the (4, 65536, 2) and (2, 2, 65536, 2) vmaps run
as one job each."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import random
from tpuemu import pallas as pl

intx = jnp.int32
floatx = jnp.float32


class _Base:
    pallas_call = staticmethod(pl.pallas_call)


self = _Base()


def test_vmap_of_simple_kernel():
    """PallasCallVmapTest.test_vmap_of_simple_kernel."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((), intx),
    )
    def add_one(x_ref, o_ref):
        o_ref[()] = x_ref[()] + 1
    out = jax.vmap(add_one)(jnp.arange(8))
    out_ref = jnp.arange(1, 9)
    np.testing.assert_allclose(out, out_ref)


def test_vmap_of_simple_kernel_with_in_axes_None():
    """PallasCallVmapTest.test_vmap_of_simple_kernel_with_in_axes_None."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((), intx),
    )
    def add(x_ref, y_ref, o_ref):
        o_ref[()] = x_ref[()] + y_ref[()]
    out = jax.vmap(add, in_axes=(0, None))(jnp.arange(8), 1)
    out_ref = jnp.arange(1, 9)
    np.testing.assert_allclose(out, out_ref)


def test_double_vmap_of_simple_kernel():
    """PallasCallVmapTest.test_double_vmap_of_simple_kernel."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((), intx),
    )
    def add_one(x_ref, o_ref):
        o_ref[()] = x_ref[()] + 1
    out = jax.vmap(jax.vmap(add_one))(jnp.arange(8).reshape((4, 2)))
    out_ref = jnp.arange(1, 9).reshape((4, 2))
    np.testing.assert_allclose(out, out_ref)


def test_quadruple_vmap_of_simple_kernel():
    """PallasCallVmapTest.test_quadruple_vmap_of_simple_kernel."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((), intx),
    )
    def add_one(x_ref, o_ref):
        o_ref[()] = x_ref[()] + 1
    out = jax.vmap(jax.vmap(jax.vmap(jax.vmap(add_one))))(
        jnp.arange(15 * 8).reshape((5, 3, 4, 2)))
    out_ref = jnp.arange(1, 15 * 8 + 1).reshape((5, 3, 4, 2))
    np.testing.assert_allclose(out, out_ref)


def test_quadruple_vmap_of_batched_kernel():
    """PallasCallVmapTest.test_quadruple_vmap_of_batched_kernel."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((7,), intx),
        grid=(7,))
    def add_one(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[i] = x_ref[i] + 1
    out = jax.vmap(jax.vmap(jax.vmap(jax.vmap(add_one))))(
        jnp.arange(15 * 8 * 7).reshape((5, 3, 4, 2, 7)))
    out_ref = jnp.arange(1, 15 * 8 * 7 + 1).reshape((5, 3, 4, 2, 7))
    np.testing.assert_allclose(out, out_ref)


def test_vmap_of_slicing_kernel():
    """PallasCallVmapTest.test_vmap_of_slicing_kernel."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((2,), intx),
        grid=(2,))
    def add_one(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[i] = x_ref[i] + 1
    out = jax.vmap(add_one)(jnp.arange(8).reshape((4, 2)))
    out_ref = jnp.arange(1, 9).reshape((4, 2))
    np.testing.assert_allclose(out, out_ref)


def test_vmap_with_hoisted_consts():
    """PallasCallVmapTest.test_vmap_with_hoisted_consts: a kernel that
    captures a NumPy array (not a scalar) is refused."""
    to_store = np.arange(128, dtype=np.float32).reshape((1, 128))
    x = np.arange(4 * 16 * 128, dtype=np.float32).reshape((4, 16, 128))

    @jax.vmap
    @functools.partial(
        self.pallas_call,
        out_shape=jax.ShapeDtypeStruct((64, 128), x.dtype),
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((32, 128), lambda i: (i, 0)),
    )
    def kernel(src, dst):
        dst[0:1] = to_store

    with pytest.raises(ValueError, match="The kernel function .* captures constants"):
        kernel(x)


def test_vmap_of_kernel_with_input_output_aliases():
    """PallasCallVmapTest.test_vmap_of_kernel_with_input_output_aliases."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((), intx),
        input_output_aliases={1: 0},
        grid=())
    def add(x_ref, _, o_ref):
        o_ref[()] = x_ref[()] + o_ref[()] + 1
    out = jax.vmap(add, in_axes=(0, None))(jnp.arange(8), 1)
    out_ref = jnp.arange(2, 10)
    np.testing.assert_allclose(out, out_ref)


def test_vmap_of_kernel_with_input_output_aliases_different_axes():
    """PallasCallVmapTest.test_vmap_of_kernel_with_input_output_aliases_different_axes."""
    @functools.partial(
        self.pallas_call,
        out_shape=jax.ShapeDtypeStruct((4,), intx),
        input_output_aliases={0: 0},
        grid=(),
    )
    def add(x_ref, o_ref):
        o_ref[()] = x_ref[()] + 1

    out = jax.vmap(add, in_axes=1)(jnp.arange(8).reshape((4, 2)))
    out_ref = jnp.arange(1, 9).reshape((4, 2)).swapaxes(0, 1)
    np.testing.assert_allclose(out, out_ref)


def test_vmap_of_slicing_kernel_different_axes():
    """PallasCallVmapTest.test_vmap_of_slicing_kernel_different_axes."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((2,), intx),
        grid=(2,))
    def add_one(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[i] = x_ref[i] + 1
    add_one_ref = lambda x: x + 1
    x = jnp.arange(8).reshape((2, 4))

    out = jax.vmap(add_one, in_axes=1, out_axes=1)(x)
    out_ref = jax.vmap(add_one_ref, in_axes=1, out_axes=1)(x)
    np.testing.assert_allclose(out, out_ref)

    out = jax.vmap(add_one, in_axes=1, out_axes=0)(x)
    out_ref = jax.vmap(add_one_ref, in_axes=1, out_axes=0)(x)
    np.testing.assert_allclose(out, out_ref)


def test_double_vmap_of_slicing_kernel_different_axes():
    """PallasCallVmapTest.test_double_vmap_of_slicing_kernel_different_axes."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((4,), floatx),
        grid=(4,))
    def sin(x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[i] = jnp.sin(x_ref[i])
    sin_ref = jnp.sin
    x = jnp.arange(64.).reshape((8, 4, 2))

    out = jax.vmap(jax.vmap(sin, in_axes=1), in_axes=0)(x)
    out_ref = jax.vmap(jax.vmap(sin_ref, in_axes=1), in_axes=0)(x)
    np.testing.assert_allclose(out, out_ref, atol=1e-3, rtol=1e-3)


def test_small_large_vmap():
    """PallasCallVmapTest.test_small_large_vmap (JAX issue 18361)."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((2,), intx),
        grid=(2,))
    def add_one(x_ref, o_ref):
        o_ref[()] = x_ref[()] + 1

    add_one = jax.vmap(jax.vmap(add_one))
    add_one_ref = lambda x: x + 1

    x = random.randint(random.key(0), (4, 65536, 2), 0, 10000)

    out = add_one(x)
    out_ref = add_one_ref(x)

    np.testing.assert_allclose(out, out_ref)


def test_small_small_large_vmap():
    """PallasCallVmapTest.test_small_small_large_vmap."""
    @functools.partial(
        self.pallas_call, out_shape=jax.ShapeDtypeStruct((2,), intx),
        grid=(2,))
    def add_one(x_ref, o_ref):
        o_ref[()] = x_ref[()] + 1

    add_one = jax.vmap(jax.vmap(jax.vmap(add_one)))
    add_one_ref = lambda x: x + 1

    x = random.randint(random.key(0), (2, 2, 65536, 2), 0, 10000)

    out = add_one(x)
    out_ref = add_one_ref(x)

    np.testing.assert_allclose(out, out_ref)
