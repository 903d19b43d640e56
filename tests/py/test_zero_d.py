# SPDX-License-Identifier: MIT
"""0-d operands and outputs of pallas_call (pallas/_zero_d.py: (1,)
arrays on the device, 0-d refs in the kernel), Python scalars as 0-d
operands, and an output aliased to an input under default specs starting
with the input's data (it read zeros once)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def test_a_0d_operand_and_output():
    def k(x_ref, y_ref, o_ref):
        o_ref[()] = x_ref[()] * 2 + y_ref[...]

    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((), jnp.float32))(
        np.float32(1.5), np.array(0.25, np.float32))
    assert np.shape(out) == () and float(out) == 3.25


def test_python_scalars_are_int32_and_float32():
    def k(i_ref, f_ref, o_ref, p_ref):
        o_ref[...] = i_ref[...] + 1
        p_ref[...] = f_ref[...] * 2

    o, p = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((), jnp.int32),
                                        jax.ShapeDtypeStruct((), jnp.float32)))(41, 0.75)
    assert np.asarray(o).dtype == np.int32 and int(o) == 42 and float(p) == 1.5


@pytest.mark.parametrize("space", [pltpu.SMEM, pltpu.VMEM])
def test_0d_specs_with_a_memory_space_and_a_block_of_nothing(space):
    def k(x_ref, v_ref, o_ref):
        o_ref[...] = v_ref[...] * x_ref[()]

    v = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)
    out = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct(v.shape, jnp.int32), grid=(1,),
        in_specs=[pl.BlockSpec((), lambda i: (), memory_space=space),
                  pl.BlockSpec(v.shape, lambda i: (0, 0))],
        out_specs=pl.BlockSpec(v.shape, lambda i: (0, 0)))(np.int32(3), v)
    np.testing.assert_array_equal(np.asarray(out), v * 3)


def test_a_0d_block_must_be_empty():
    with pytest.raises(ValueError, match="0-d: its block shape must be"):
        pl.pallas_call(lambda x_ref, o_ref: None,
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec((1,), lambda: (0,))])(np.float32(1))


def test_an_aliased_output_under_default_specs_holds_the_input():
    def k(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + o_ref[...] + 1

    x = np.full((8, 128), 3, np.int32)
    y = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)
    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),
                         input_output_aliases={1: 0})(x, y)
    np.testing.assert_array_equal(np.asarray(out), x + y + 1)
