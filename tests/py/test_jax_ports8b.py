# SPDX-License-Identifier: MIT
"""Ports of JAX's own Pallas TPU tests, eighth round, second file
(tests/pallas/indexing_test.py IndexerOpsTest; tpu_pallas_pipeline_test.py
gaps), each named after the test it ports, with a NumPy reference:
loads and stores through chained ref.at[...] windows, dynamic starts in
the second-minor dimension. Gaps are strict xfails naming them."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu import random
from tpuemu.pallas import tpu as pltpu


# --- indexing_test.py IndexerOpsTest ---

_INDEXING_TEST_CASES = [
    ((4, 8, 128), (...,), (4, 8, 128)),
    ((4, 8, 128), (0,), (8, 128)),
    ((4, 8, 128), (pl.ds(1, 2),), (2, 8, 128)),
    ((4, 8, 128), (pl.ds(2, 2),), (2, 8, 128)),
    ((4, 8, 128), (pl.ds(2, 2), 0), (8, 128)),
    ((4, 8, 128), (pl.ds(2, 2), 1), (8, 128)),
    ((4, 8, 128), (slice(2, 4), 1), (8, 128)),
    ((4, 8, 128), (slice(2, 4), slice(0, 1), 0), (8, 128)),
    ((4, 8, 128), ((0, pl.ds(0, 8), pl.ds(0, 128)), ...), (8, 128)),
    ((4, 8, 128), (..., (0, pl.ds(0, 8), pl.ds(0, 128)), ...), (8, 128)),
]


def _maybe_ds_to_slice(x):
    if isinstance(x, type(pl.ds(0, 1))):
        return slice(x.start, x.start + x.size)
    return x


@pytest.mark.parametrize("case", _INDEXING_TEST_CASES)
@pytest.mark.parametrize("indexer_type", ["state", "pallas"])
def test_can_load_with_ref_at(indexer_type, case):
    in_shape, indexers, out_shape = case
    dtype = jnp.float32
    def body(x_ref, y_ref):
        for indexer in indexers[:-1]:
            x_ref = x_ref.at[indexer]
        if indexer_type == "state":
            x = x_ref[indexers[-1]]
            y_ref[...] = x
        elif indexer_type == "pallas":
            x = pl.load(x_ref, indexers[-1])
            pl.store(y_ref, ..., x)

    x = random.normal(random.key(0), in_shape, dtype=dtype)
    y = x
    for indexer in indexers:
        if not isinstance(indexer, tuple):
            indexer = (indexer,)
        indexer = tuple(map(_maybe_ds_to_slice, indexer))
        y = y[indexer]
    assert y.shape == out_shape
    out = pl.pallas_call(body, out_shape=y)(x)
    np.testing.assert_allclose(out, y)


@pytest.mark.parametrize("case", _INDEXING_TEST_CASES)
@pytest.mark.parametrize("indexer_type", ["state", "pallas"])
def test_can_store_with_ref_at(indexer_type, case):
    in_shape, indexers, val_shape = case
    dtype = jnp.float32
    def body(x_ref, y_ref):
        y_ref[...] = jnp.zeros_like(y_ref)
        for indexer in indexers[:-1]:
            y_ref = y_ref.at[indexer]
        if indexer_type == "state":
            x = x_ref[...]
            y_ref[indexers[-1]] = x
        elif indexer_type == "pallas":
            x = pl.load(x_ref, ...)
            pl.store(y_ref, indexers[-1], x)

    val = random.normal(random.key(0), val_shape, dtype=dtype)
    x = np.zeros(in_shape, dtype=dtype)
    y = x
    for indexer in indexers:
        if not isinstance(indexer, tuple):
            indexer = (indexer,)
        indexer = tuple(map(_maybe_ds_to_slice, indexer))
        y = y[indexer]
    assert y.shape == val_shape
    y[...] = val
    out = pl.pallas_call(body, out_shape=x)(val)
    np.testing.assert_allclose(out, x)


def test_load_with_dynamic_2nd_minor_index():
    m, n = 32, 128
    k = 10
    start = 2

    def kernel(x_ref, indices, y_ref):
        y_ref[...] = pl.load(x_ref, pl.ds(indices[0], k))

    x = jnp.arange(m * n, dtype=jnp.int32).reshape((m, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((k, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res, x[start:start + k, :])


def test_store_with_dynamic_2nd_minor_index():
    m, n = 10, 128
    k = 32
    start = 2

    def kernel(x_ref, indices, y_ref):
        pl.store(y_ref, pl.ds(indices[0], m), x_ref[...])

    x = jnp.arange(m * n, dtype=jnp.int32).reshape((m, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((k, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res[start:start + m, :], x)


def test_load_one_row_with_dynamic_2nd_minor_index():
    b, m, n = 4, 16, 256
    start = 3

    def kernel(x_ref, indices, y_ref):
        y_ref[...] = x_ref[:, pl.ds(indices[0], 1), :]

    x = jnp.arange(b * m * n, dtype=jnp.int32).reshape((b, m, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res, x[:, start:start + 1, :])


def test_store_one_row_with_dynamic_2nd_minor_index():
    b, m, n = 4, 16, 256
    start = 3

    def kernel(x_ref, indices, y_ref):
        y_ref[:, pl.ds(indices[0], 1), :] = x_ref[...]

    x = jnp.arange(b * 1 * n, dtype=jnp.int32).reshape((b, 1, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((b, m, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res[:, start:start + 1, :], x)
