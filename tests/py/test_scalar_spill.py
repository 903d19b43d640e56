# SPDX-License-Identifier: MIT
"""Long scalar-core expressions: the scalar core inlines locals, so a
running sum of many SMEM elements is spilled into a hidden SMEM scratch
(_spill) once its text grows long; the results are NumPy's."""
import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


def test_running_sum_of_64_elements():
    """Prefix sums and prefix products (wrapping in int32) of an (8, 8)
    SMEM block, element by element."""
    x = np.random.default_rng(3).integers(-50, 50, (8, 8)).astype(np.int32)

    def kernel(x_ref, s_ref, p_ref):
        s = jnp.int32(0) + 0
        p = x_ref[0, 0] * 0 + 1
        for i in range(8):
            for j in range(8):
                s = s + x_ref[i, j]
                p = p * (x_ref[i, j] % 7 + 1)
                s_ref[i, j] = s
                p_ref[i, j] = p

    sds = jax.ShapeDtypeStruct((8, 8), jnp.int32)
    call = pl.pallas_call(kernel, in_specs=[SMEM], out_specs=[SMEM, SMEM],
                          out_shape=[sds, sds])
    s, p = call(x)
    np.testing.assert_array_equal(s, np.cumsum(x.reshape(-1)).reshape(8, 8))
    with np.errstate(over="ignore"):
        want = np.cumprod((x.reshape(-1) % 7 + 1).astype(np.int32), dtype=np.int32)
    np.testing.assert_array_equal(p, want.reshape(8, 8))
    assert any(t.startswith("_spill[") for t in call.statements)


def test_spill_under_when_and_a_grid():
    """A long sum made under pl.when on a grid step: stored there, read
    there, on every step."""
    x = np.arange(4 * 32, dtype=np.int32).reshape(4, 32)

    def kernel(x_ref, o_ref):
        i = pl.program_id(0)

        @pl.when(i % 2 == 1)
        def _():
            acc = x_ref[i, 0]
            for j in range(1, 32):
                acc = acc + x_ref[i, j] * j
            o_ref[i] = acc

        @pl.when(i % 2 == 0)
        def _():
            o_ref[i] = -i

    y = pl.pallas_call(kernel, grid=(4,), in_specs=[SMEM], out_specs=SMEM,
                       out_shape=jax.ShapeDtypeStruct((4,), jnp.int32))(x)
    w = (x * np.maximum(np.arange(32), 1)[None, :]).sum(1)
    w[:, ] = np.where(np.arange(4) % 2 == 1, w, -np.arange(4))
    np.testing.assert_array_equal(y, w)


def test_long_sum_of_int8_elements_as_a_window_start():
    """int8 SMEM values summed and used as the start of a VMEM read."""
    offs = np.array([1, 1, 2, 0, 1, 0, 0, 1, 2, 0, 0, 1, 0, 0, 0, 1], np.int8)
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)

    def kernel(o_ref, x_ref, y_ref):
        start = o_ref[0].astype(jnp.int32)
        for k in range(1, 16):
            start = start + o_ref[k].astype(jnp.int32)
        y_ref[...] = x_ref[pl.ds(start * 2, 8), :]

    y = pl.pallas_call(kernel, in_specs=[SMEM, pl.BlockSpec(memory_space=pltpu.VMEM)],
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(offs, x)
    s = int(offs.astype(np.int32).sum()) * 2
    np.testing.assert_array_equal(y, x[s:s + 8])


def test_spill_in_a_device_loop():
    """A long sum in the body of a 40-trip device loop: its spill slot is
    stored again at every trip, so each trip reads its own row's sum."""
    x = np.arange(40 * 16, dtype=np.int32).reshape(40, 16) % 13

    def kernel(x_ref, o_ref):
        def body(i, c):
            s = x_ref[i, 0]
            for j in range(1, 16):
                s = s + x_ref[i, j] * j
            o_ref[i] = s
            return c
        lax.fori_loop(0, 40, body, 0)

    call = pl.pallas_call(kernel, in_specs=[SMEM], out_specs=SMEM,
                          out_shape=jax.ShapeDtypeStruct((40,), jnp.int32))
    y = call(x)
    np.testing.assert_array_equal(y, (x * np.maximum(np.arange(16), 1)).sum(1))
    assert jax.last_stats()["loop_trips"] == 40
    assert any(t.startswith("_spill[") for t in call.statements)
