# SPDX-License-Identifier: MIT
"""Ports of JAX's own Pallas TPU tests, second round (tests/pallas/
tpu_pallas_test.py, indexing_test.py, tpu_pallas_async_test.py, ops_test.py)
and of the Pallas TPU docs, each named after the test or example it ports,
with a NumPy reference: strided slices, float and narrow SMEM arrays, loops
with traced bounds, 2-D semaphore arrays, DMA slices from SMEM values."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_rng = np.random.default_rng(4321)


def _normal(shape):
    return _rng.standard_normal(shape).astype(np.float32)


# --- strided slices: the DMA engine gathers and scatters them ---

def test_strided_load_1d():
    """ops_test.py OpsTest.test_strided_load (1-D: issue 20895)."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[::4]

    x = np.arange(16, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4,), jnp.float32))(x)
    np.testing.assert_array_equal(out, x[::4])


def test_strided_load_2d():
    """ops_test.py OpsTest.test_strided_load (the (16, 4) form)."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[::4]

    x = np.arange(64, dtype=np.float32).reshape((16, 4))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 4), jnp.float32))(x)
    np.testing.assert_array_equal(out, x[::4])


@pytest.mark.parametrize("slice_type", ["slice", "ds"])
@pytest.mark.parametrize("indexer_type", ["state", "pallas"])
@pytest.mark.parametrize("ref_shape,indices,strides", [
    ((8, 8, 32), (1, 2, 3), (2, 3, 5)),
    ((7, 7, 33), (0, 6, 31), (10, 1, 1)),
    ((8, 8, 32), (6, 0, 0), (1, 4, 9)),
])
def test_strided_load_and_store(indexer_type, slice_type, ref_shape, indices, strides):
    """indexing_test.py IndexerOpsTest.test_strided_load_and_store, at
    fixed points of its hypothesis ranges."""
    ref_shape = (*ref_shape, 128)
    indices = (*indices, 0)
    strides = (*strides, 1)
    vec_shape = [(l - i + s - 1) // s for l, i, s in zip(ref_shape, indices, strides)]

    def body(x_ref, y_ref1, y_ref2):
        if slice_type == "slice":
            slices = tuple(slice(i, rs, s) for i, rs, s in zip(indices, ref_shape, strides))
        else:
            slices = tuple(pl.ds(i, vs, s) for i, vs, s in zip(indices, vec_shape, strides))
        if indexer_type == "state":
            y_ref1[...] = x_ref[slices]
            y_ref2[slices] = y_ref1[...]
        else:
            pl.store(y_ref1, ..., pl.load(x_ref, slices))
            pl.store(y_ref2, slices, pl.load(y_ref1, ...))

    x = _normal(ref_shape)
    y1, y2 = pl.pallas_call(body, out_shape=[
        jax.ShapeDtypeStruct(tuple(vec_shape), jnp.float32),
        jax.ShapeDtypeStruct(ref_shape, jnp.float32)])(x)
    slices = tuple(slice(i, l, s) for l, i, s in zip(ref_shape, indices, strides))
    np.testing.assert_array_equal(y1, x[slices])
    np.testing.assert_array_equal(y2[slices], x[slices])


def test_strided_rows_ds_keyword_and_accumulate():
    """pl.ds(0, 8, stride=2) rows read, and += into strided rows."""
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[pl.ds(1, 8, stride=2), :] += x_ref[pl.ds(0, 8, stride=2), :] * 2.0

    x = _normal((16, 128))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)
    want = np.zeros_like(x)
    want[1::2] = x[0::2] * 2.0
    np.testing.assert_array_equal(out, want)


def test_advanced_indexer_slices():
    """indexing_test.py AdvancedIndexerOpsTest.test_advanced_indexer, its
    slice cases: arr[::4, ::4], arr[1:14:2, 2:13:4], arr[1::3, :]."""
    for shape, f in [((12, 12), lambda a: a[::4, ::4]),
                     ((16, 16), lambda a: a[1:14:2, 2:13:4]),
                     ((8, 2), lambda a: a[1::3, :])]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        y = f(x)

        def kernel(x_ref, o_ref):
            o_ref[...] = f(x_ref)

        out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(y.shape, jnp.float32))(x)
        np.testing.assert_array_equal(out, y)


def test_strided_value_slice_is_refused():
    def kernel(x_ref, o_ref):
        v = x_ref[...] + 1.0
        o_ref[...] = v[::2]

    with pytest.raises(pl.TraceError, match="without a step"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.float32))(
            _normal((8, 128)))
