"""SMEM blocks and scratch of bfloat16, int8, uint8, bool and uint32: the
device holds each element at its own size, the scalar core widens loads and
narrows stores (doc/numerics.md, "SMEM elements")."""
import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def test_int8_smem_output_from_int32_arithmetic():
    """int32 scalar-core arithmetic stored into an int8 SMEM output: cast
    as jnp's astype (the low byte: 300 is 44), with and without astype."""
    x = np.array([1, 3, -2, 100, 127, -128, 7, 0], np.int32)

    def kernel(x_ref, o_ref, p_ref):
        for i in range(8):
            v = x_ref[i] * 100 + 44
            o_ref[i] = v.astype(jnp.int8)
            p_ref[i] = v		# the store casts too

    o, p = pl.pallas_call(
        kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)] * 2,
        out_shape=[jax.ShapeDtypeStruct((8,), jnp.int8)] * 2)(x)
    want = (x * 100 + 44).astype(np.int8)	# wraps, as XLA's convert
    np.testing.assert_array_equal(np.asarray(o), want)
    np.testing.assert_array_equal(np.asarray(p), want)


def test_bool_smem_input_drives_pl_when():
    """A bool SMEM input's elements as pl.when conditions, per grid step."""
    flags = np.array([True, False, False, True, True, False, True, False])
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)

    def kernel(f_ref, x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[...] = jnp.zeros((8, 128), jnp.float32)

        @pl.when(f_ref[i])
        def _():
            o_ref[...] = x_ref[...] + 1

    out = pl.pallas_call(
        kernel, grid=(8,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))(flags, x)
    want = np.where(np.repeat(flags, 8)[:, None], x + 1, 0)
    np.testing.assert_array_equal(np.asarray(out), want)


def test_uint8_and_int8_smem_reads_widen():
    """uint8 200 reads as 200 and int8 -56 as -56 (the same byte)."""
    u = np.array([200, 1, 255, 0], np.uint8)
    s = u.view(np.int8)

    def kernel(u_ref, s_ref, o_ref):
        for i in range(4):
            o_ref[i] = u_ref[i].astype(jnp.int32) * 1000 + s_ref[i].astype(jnp.int32)

    out = pl.pallas_call(
        kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)] * 2,
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((4,), jnp.int32))(u, s)
    np.testing.assert_array_equal(np.asarray(out),
                                  u.astype(np.int32) * 1000 + s.astype(np.int32))


def test_bf16_smem_scratch_rounds_and_reads_back():
    """A float stored into a bfloat16 SMEM scratch rounds to nearest even;
    reading it back gives that bfloat16 value."""
    x = np.array([[1.00390625, 3.14159, -2.5e-3, 65504.0] + [0.0] * 124] * 8,
                 np.float32)

    def kernel(x_ref, o_ref, s_ref):
        for j in range(4):
            s_ref[j] = x_ref[:][0, j]
        for j in range(4):
            o_ref[j] = s_ref[j].astype(jnp.float32)

    out = pl.pallas_call(
        kernel, out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((4,), jnp.float32),
        scratch_shapes=[pltpu.SMEM((4,), jnp.bfloat16)])(x)
    bits = jax.to_bf16(x[0, :4]).astype(np.uint32) << 16
    np.testing.assert_array_equal(np.asarray(out), bits.view(np.float32))
