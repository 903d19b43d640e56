# SPDX-License-Identifier: MIT
"""jnp.take of 2-D values with 1-D indices along either axis, in every
mode, against NumPy with JAX's semantics (fill by default), in a kernel
and on the host."""
import numpy as np
import pytest
import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl

_IDX = np.array([3, 0, 15, 7, -1, 20, -17, 2], np.int32)


def _want(x, idx, axis, mode):
    n = x.shape[axis]
    if mode in ("clip", "wrap"):
        return np.take(x, idx, axis=axis, mode=mode)
    ok = (idx >= -n) & (idx < n)
    w = np.take(x, np.where(ok, idx, 0), axis=axis)
    fill = np.nan if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return np.where(ok[:, None] if axis == 0 else ok[None, :], w, fill).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("mode", [None, "fill", "clip", "wrap"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_in_a_kernel(axis, mode, dtype):
    x = (np.arange(16 * 128) * 7 % 1000).reshape(16, 128).astype(dtype)
    want = _want(x, _IDX, axis % 2, mode)

    def k(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take(x_ref[...], i_ref[...], axis=axis, mode=mode)

    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(want.shape, x.dtype))(x, _IDX)
    np.testing.assert_array_equal(np.asarray(out), want)
    np.testing.assert_array_equal(jnp.take(x, _IDX, axis=axis, mode=mode), want)


def test_take_refusals_name_the_shapes():
    x = np.zeros((16, 128), np.float32)

    def k(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take(x_ref[...], i_ref[...])

    with pytest.raises(pl.TraceError, match="axis None"):
        pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x, _IDX)


def test_indexing_a_value_with_an_index_array():
    """x[idx] and x[:, idx] of a computed value: a gather along that axis,
    out-of-range indices clamped after one wrap of negatives, as JAX's
    indexing retrieves (jnp.take's default would fill)."""
    x = (np.arange(16 * 128) % 251).reshape(16, 128).astype(np.float32)
    idx = np.array([5, -1, 1, 0, 15, 99, -17, 2], np.int32)

    def jax_idx(n):
        return np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1)

    def k(x_ref, i_ref, r_ref, c_ref):
        v = x_ref[...] * 2
        r_ref[...] = v[i_ref[...]]
        c_ref[...] = v[:, i_ref[...]]

    r, c = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                                        jax.ShapeDtypeStruct((16, 8), jnp.float32)))(x, idx)
    np.testing.assert_array_equal(np.asarray(r), (x * 2)[jax_idx(16)])
    np.testing.assert_array_equal(np.asarray(c), (x * 2)[:, jax_idx(128)])
