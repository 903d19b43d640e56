# SPDX-License-Identifier: MIT
"""lax.gather in the form jnp.take_along_axis lowers to (a trailing index
vector of one, one-element slices, the operand's other dimensions
batched), in a kernel and on the host, against NumPy with lax's modes:
fill (the default; a negative index is outside, lax does not wrap), clip
and promise_in_bounds; any other form is refused by name."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl


def _dn(axis):
    other = (1 - axis,)
    return lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                      start_index_map=(axis,), operand_batching_dims=other,
                                      start_indices_batching_dims=other)


def _want(x, idx, axis, mode):
    n = x.shape[axis]
    if mode == "clip":
        return np.take_along_axis(x, np.clip(idx, 0, n - 1), axis)
    ok = (idx >= 0) & (idx < n)
    w = np.take_along_axis(x, np.where(ok, idx, 0), axis)
    fill = np.nan if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return np.where(ok, w, fill).astype(x.dtype)


def _gather(x, idx, axis, mode):
    return lax.gather(x, idx.reshape(idx.shape + (1,)), _dn(axis), (1, 1), mode=mode)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
@pytest.mark.parametrize("mode", [None, "clip", lax.GatherScatterMode.FILL_OR_DROP])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_in_a_kernel_and_on_the_host(axis, mode, dtype):
    rng = np.random.default_rng(axis)
    x = rng.integers(-100, 100, (16, 128)).astype(dtype)
    n = x.shape[axis]
    idx = rng.integers(-3, n + 3, (16, 128)).astype(np.int32)
    want = _want(x, idx, axis, getattr(mode, "name", mode))

    def kernel(x_ref, i_ref, o_ref):
        o_ref[...] = _gather(x_ref[...], i_ref[...], axis, mode)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, idx)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(_gather(x, idx, axis, mode), want)


def test_promise_in_bounds_fails_the_job_for_an_index_outside():
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    idx = np.zeros((16, 128), np.int32)
    idx[3, 5] = 16

    def kernel(x_ref, i_ref, o_ref):
        o_ref[...] = _gather(x_ref[...], i_ref[...], 0, "promise_in_bounds")

    with pytest.raises(jax.TpurtError):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, idx)
    idx[3, 5] = 15
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, idx)
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx, 0))


def test_other_forms_are_refused_by_name():
    x = np.zeros((16, 128), np.float32)
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    assert dn.offset_dims == (1,) and dn.operand_batching_dims == ()

    def kernel(x_ref, o_ref):
        o_ref[...] = lax.gather(x_ref[...], jnp.zeros((4, 1), jnp.int32), dn, (1, 128))

    with pytest.raises(pl.TraceError, match="take_along_axis form"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.float32))(x)
    with pytest.raises(pl.TraceError, match="mode"):
        _gather(x, np.zeros((16, 128), np.int32), 0, "one_hot")
