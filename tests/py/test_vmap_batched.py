# SPDX-License-Identifier: MIT
"""jax.vmap of a pallas_call as one call (pallas/_batch.py): the batch a
leading "parallel" grid dimension, pl.program_id and pl.num_programs the
kernel's own, in_axes/out_axes anywhere, unmapped operands shared, nested
vmaps one batch; forms it cannot batch still run once per index."""
import functools

import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

X = np.random.default_rng(0).standard_normal((6, 16, 128)).astype(np.float32)


@functools.partial(
    pl.pallas_call, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(2,),
    in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)), pl.BlockSpec((8, 128), lambda i: (0, 0))],
    out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
    compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))
def _kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...] + pl.program_id(0) + 10 * pl.num_programs(0)


def _want(x, w):
    return x * w[:8].reshape((1,) * (x.ndim - 2) + (8, 128)).repeat(2, axis=-2) + \
        np.repeat(np.arange(2), 8)[:, None] + 20


def test_one_call_for_the_batch():
    w = np.full((16, 128), 3, np.float32)
    out = jax.vmap(_kernel, in_axes=(0, None))(X, w)
    np.testing.assert_allclose(np.asarray(out), _want(X, w), rtol=1e-6)
    assert jax.last_stats()["steps"] == 6 * 2	# one job of the whole batch


def test_axes_moved_in_and_out():
    w = np.full((16, 128), 2, np.float32)
    out = jax.vmap(_kernel, in_axes=(2, None), out_axes=1)(np.moveaxis(X, 0, 2), w)
    np.testing.assert_allclose(np.asarray(out), np.moveaxis(_want(X, w), 0, 1), rtol=1e-6)


def test_both_operands_mapped_and_nested():
    x = X.reshape(2, 3, 16, 128)
    w = (np.arange(6, dtype=np.float32) + 1).reshape(2, 3, 1, 1) * np.ones((16, 128), np.float32)
    out = jax.vmap(jax.vmap(_kernel))(x, w)
    want = x * w + np.repeat(np.arange(2), 8)[:, None] + 20
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert jax.vmap(jax.vmap(_kernel))._batchable.depth == 2


def test_a_vmap_it_cannot_batch_runs_per_index():
    """An unmapped input aliased to the output: each instance writes its
    own copy, so the batch runs once per index (the same results)."""
    def k(x_ref, a_ref, o_ref):
        o_ref[...] = x_ref[...] + a_ref[...]
    call = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                          input_output_aliases={1: 0})
    a = np.ones((16, 128), np.float32)
    out = jax.vmap(call, in_axes=(0, None))(X, a)
    np.testing.assert_allclose(np.asarray(out), X + 1, rtol=1e-6)
    assert jax.last_stats()["steps"] == 1	# the last instance's own job
