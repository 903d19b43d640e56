# SPDX-License-Identifier: MIT
"""A one-element vector value as a ref's index or a pl.ds start: stored to
VMEM and copied by the DMA engine into a word the scalar core reads
(python/tpuemu/_to_scalar.py), against NumPy; a float element as an index
is refused by name."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8"])
def test_an_element_as_a_row_index_and_a_window_start(dtype):
    x = np.array([[5, 1, 2, 0], [3, 7, 0, 1]], dtype)

    def kernel(x_ref, t_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        r = jnp.reshape(x_ref[1:2, 0:1], ())		# 3
        o_ref[r] = t_ref[pl.ds(jnp.reshape(x_ref[0:1, 0:1], ()), 1)][0]	# row 5 of t
        o_ref[pl.ds(x_ref[0:1, 1:2], 2), :] = t_ref[0:2, :] + 1	# rows 1, 2

    t = np.arange(16 * 128, dtype=np.int32).reshape(16, 128)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x, t)
    want = np.zeros((8, 128), np.int32)
    want[3] = t[5]
    want[1:3] = t[0:2] + 1
    np.testing.assert_array_equal(out, want)


def test_an_element_computed_in_a_device_loop():
    """Each trip moves its own element: the SMEM word is stored once a trip."""
    def kernel(i_ref, t_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        def body(k, carry):
            v = i_ref[pl.ds(k, 1), :][:, 0:1] * 2	# a (1, 1) vector value
            o_ref[pl.ds(k, 1), :] = t_ref[pl.ds(v, 1), :]
            return carry
        lax.fori_loop(0, 4, body, 0)

    idx = np.array([[3], [0], [2], [1]], np.int32) * np.ones((1, 128), np.int32)
    t = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.int32))(idx, t)
    np.testing.assert_array_equal(out, t[idx[:, 0] * 2])


def test_a_float_element_is_refused_as_an_index():
    def kernel(x_ref, o_ref):
        o_ref[jnp.reshape(x_ref[0:1, 0:1], ())] = jnp.ones((128,), jnp.float32)

    with pytest.raises(pl.TraceError, match="must be an integer, not float32"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(
            np.zeros((8, 128), np.float32))


_SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_elements_of_a_1d_value_to_smem_and_back(dtype):
    """x[i] of a 1-D value is its lane i (negative i from the end), a
    value of shape () that an SMEM element stores and a broadcast spreads;
    SMEM scalars reshaped to (1,) or stacked are a vector."""
    x = np.array([-0.0, 2, -3, 7], dtype)
    s = np.array([4, 9], dtype)

    def kernel(x_ref, s_ref, o_ref, b_ref, v_ref):
        v = x_ref[...]
        o_ref[0] = v[1]
        o_ref[1] = v[-1]
        o_ref[2] = v[0]
        b_ref[...] = jnp.broadcast_to(v[2], (8, 128))
        v_ref[...] = jnp.concatenate([jnp.stack([s_ref[1], s_ref[0]]),
                                      jnp.reshape(s_ref[0], (1,)), v[1:2]])

    o, b, v = pl.pallas_call(
        kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM), _SMEM],
        out_specs=(_SMEM, pl.BlockSpec(memory_space=pltpu.VMEM),
                   pl.BlockSpec(memory_space=pltpu.VMEM)),
        out_shape=(jax.ShapeDtypeStruct((3,), dtype), jax.ShapeDtypeStruct((8, 128), dtype),
                   jax.ShapeDtypeStruct((4,), dtype)))(x, s)
    np.testing.assert_array_equal(o, x[[1, 3, 0]])
    assert np.signbit(o[2]) == np.signbit(x[0])	# -0.0 kept, not summed to +0.0
    np.testing.assert_array_equal(b, np.full((8, 128), x[2]))
    np.testing.assert_array_equal(v, np.array([9, 4, 4, 2], dtype))


def test_an_element_past_a_1d_value_is_refused():
    def kernel(x_ref, o_ref):
        o_ref[0] = x_ref[...][4]

    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        pl.pallas_call(kernel, out_specs=_SMEM,
                       out_shape=jax.ShapeDtypeStruct((1,), jnp.float32))(
            np.zeros(4, np.float32))
