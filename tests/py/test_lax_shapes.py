# SPDX-License-Identifier: MIT
"""lax's shape and index functions over jnp's (dynamic_update_slice and
its _in_dim, argmax, argmin, iota, round in both rounding methods,
concatenate, pad with negative and positive edges, squeeze, expand_dims,
reshape with dimensions) and pl.max_contiguous, in a kernel and on the
host, against NumPy; lax.sort and lax.top_k on the host; interior padding,
a traced start and a sort in a kernel are refused by name."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_X = (np.arange(8 * 128, dtype=np.float32).reshape(8, 128) * 0.25 - 100.5)

_CASES = {
    "dynamic_update_slice": (lambda x: lax.dynamic_update_slice(x, x[0:2, 0:128] * 2, (7, 0)),
                             lambda x: np.concatenate([x[:6], x[0:2] * 2])),
    "dynamic_update_slice_in_dim": (
        lambda x: lax.dynamic_update_slice_in_dim(x, x[0:1] + 1, 3, 0),
        lambda x: np.concatenate([x[:3], x[0:1] + 1, x[4:]])),
    "argmax": (lambda x: lax.argmax(x, 1, jnp.int32),
               lambda x: np.argmax(x, 1).astype(np.int32)),
    "argmin": (lambda x: lax.argmin(x, 0, jnp.int32), lambda x: np.argmin(x, 0).astype(np.int32)),
    "round": (lambda x: lax.round(x), lambda x: np.where(np.abs(x - np.trunc(x)) >= 0.5,
                                                      np.trunc(x) + np.sign(x), np.trunc(x))),
    "round_even": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), np.round),
    "concatenate": (lambda x: lax.concatenate([x[0:2], x[4:8]], 0),
                    lambda x: np.concatenate([x[0:2], x[4:8]], 0)),
    "pad": (lambda x: lax.pad(x, np.float32(7), [(2, -3, 0), (0, 0, 0)]),
            lambda x: np.pad(x, [(2, 0), (0, 0)], constant_values=7)[:-3]),
    "squeeze_expand": (lambda x: lax.squeeze(lax.expand_dims(x, (0,)), (0,)) + 1, lambda x: x + 1),
    "reshape": (lambda x: lax.reshape(x, (4, 2, 128)) * 3, lambda x: x.reshape(4, 2, 128) * 3),
    "max_contiguous": (lambda x: pl.max_contiguous(x, 128) - 1, lambda x: x - 1),
}


@pytest.mark.parametrize("name", list(_CASES))
def test_in_a_kernel_and_on_the_host(name):
    fn, ref = _CASES[name]
    x = _X.copy()
    x[1, 3] = 2.5	# ties, both signs
    x[2, 5] = -0.5
    x[3, 7] = 0.49999997
    want = ref(x)

    def kernel(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(want.shape, want.dtype))(x)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(fn(x), want)


def test_iota():
    def kernel(o_ref):
        o_ref[...] = lax.iota(jnp.int32, 128)[None, :] + jnp.zeros((8, 128), jnp.int32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))()
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(128, dtype=np.int32), (8, 128)))
    np.testing.assert_array_equal(lax.iota(np.int32, 5), np.arange(5))


def test_refusals_name_what():
    def interior(x_ref, o_ref):
        o_ref[...] = lax.pad(x_ref[...], 0.0, [(0, 0, 1), (0, 0, 0)])

    with pytest.raises(pl.TraceError, match="interior padding"):
        pl.pallas_call(interior, out_shape=jax.ShapeDtypeStruct((15, 128), jnp.float32))(_X)

    def traced(s_ref, x_ref, o_ref):
        o_ref[...] = lax.dynamic_update_slice(x_ref[...], x_ref[0:1], (s_ref[0], 0))

    with pytest.raises(pl.TraceError, match="start .* is traced"):
        pl.pallas_call(traced, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec()])(
                           np.zeros(1, np.int32), _X)


def test_sort_and_top_k_on_the_host():
    x = np.array([[3.0, np.nan, -1.0, 3.0, 0.5], [2.0, 2.0, 1.0, -4.0, 9.0]], np.float32)
    np.testing.assert_array_equal(lax.sort(x), np.sort(x, axis=-1))
    np.testing.assert_array_equal(lax.sort(x, dimension=0), np.sort(x, axis=0))
    keys = np.array([2, 1, 2, 1], np.int32)
    vals = np.array([10, 20, 30, 40], np.int32)
    k2, v2 = lax.sort((keys, vals), num_keys=1)
    np.testing.assert_array_equal(k2, [1, 1, 2, 2])
    np.testing.assert_array_equal(v2, [20, 40, 10, 30])	# stable
    v, i = lax.top_k(np.array([[1, 5, 5, 2], [0, -1, 7, 7]], np.int32), 3)
    np.testing.assert_array_equal(v, [[5, 5, 2], [7, 7, 0]])
    np.testing.assert_array_equal(i, [[1, 2, 3], [2, 3, 0]])
    assert i.dtype == np.int32

    def kernel(x_ref, o_ref):
        o_ref[...] = lax.sort(x_ref[...])

    with pytest.raises(pl.TraceError, match="lax.sort is not supported in a kernel"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(_X)
