# SPDX-License-Identifier: MIT
"""Ports of JAX's own Pallas TPU tests, third round (tests/pallas/
tpu_pallas_test.py, tpu_pallas_async_test.py, tpu_ops_test.py,
ops_test.py), each named after the test it ports, with a NumPy
reference: N-D semaphore arrays, DMA windows at SMEM offsets, slices of
whole reads of 3-D blocks, take_along_axis and bitcasts."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_rng = np.random.default_rng(777)
_ANY = pl.BlockSpec(memory_space=pl.ANY)


def _normal(shape):
    return _rng.standard_normal(shape).astype(np.float32)


# --- semaphore arrays of any rank: the device's are flat, indexed row-major ---

def test_can_wait_on_semaphore_array():
    """tpu_pallas_test.py PallasCallDMATest.test_can_wait_on_semaphore_array,
    with the counts read back before each last wait."""
    def kernel(y_ref):
        def body(sems):
            pltpu.semaphore_signal(sems.at[0])
            pltpu.semaphore_wait(sems.at[0])
            pltpu.semaphore_signal(sems.at[1], 2)
            y_ref[0] = pltpu.semaphore_read(sems.at[1])
            pltpu.semaphore_wait(sems.at[1])
            pltpu.semaphore_wait(sems.at[1])
            for _ in range(3):
                pltpu.semaphore_signal(sems.at[2])
            y_ref[1] = pltpu.semaphore_read(sems.at[2])
            for _ in range(3):
                pltpu.semaphore_wait(sems.at[2])
        pltpu.run_scoped(body, pltpu.SemaphoreType.REGULAR((3,)))

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))()
    np.testing.assert_array_equal(y, [2, 3])


def test_can_wait_on_semaphore_array_with_dynamic_index():
    """tpu_pallas_test.py PallasCallDMATest.
    test_can_wait_on_semaphore_array_with_dynamic_index: a (4, 3) array
    indexed sems.at[program_id, j]; each step also reports its row's
    counts."""
    def kernel(y_ref):
        i = pl.program_id(0)

        def body(sems):
            pltpu.semaphore_signal(sems.at[i, 0])
            pltpu.semaphore_wait(sems.at[i, 0])
            pltpu.semaphore_signal(sems.at[i, 1], 2)
            pltpu.semaphore_wait(sems.at[i, 1])
            for _ in range(3):
                pltpu.semaphore_signal(sems.at[i, 2])
            one = pltpu.semaphore_read(sems.at[i, 1])
            three = pltpu.semaphore_read(sems.at[i, 2])
            y_ref[...] = jnp.full((8, 128), (i * 100 + one * 10 + three).astype(jnp.float32))
            pltpu.semaphore_wait(sems.at[i, 1])
            for _ in range(3):
                pltpu.semaphore_wait(sems.at[i, 2])
        pltpu.run_scoped(body, pltpu.SemaphoreType.REGULAR((4, 3)))

    y = pl.pallas_call(kernel, in_specs=[], grid=4, debug=True,
                       out_specs=pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0)),
                       out_shape=jax.ShapeDtypeStruct((4, 8, 128), jnp.float32))()
    want = np.broadcast_to((np.arange(4) * 100 + 13)[:, None, None], (4, 8, 128))
    np.testing.assert_array_equal(y, want)


def test_semaphore_2d_array_of_dma_copies():
    """The 2-D DMA semaphore arrays of JAX's MoE kernels
    (pltpu.SemaphoreType.DMA((2, 3)) as weight_sems[slot, channel]): six
    copies in flight at once, each on its own element."""
    def kernel(x_hbm, o_hbm, sems):
        copies = [[pltpu.make_async_copy(x_hbm.at[s, c], o_hbm.at[1 - s, c], sems.at[s, c])
                   for c in range(3)] for s in range(2)]
        for row in copies:
            for cp in row:
                cp.start()
        for row in reversed(copies):
            for cp in row:
                cp.wait()

    x = _normal((2, 3, 8, 128))
    y = pl.pallas_call(kernel, in_specs=[_ANY], out_specs=_ANY,
                       scratch_shapes=[pltpu.SemaphoreType.DMA((2, 3))],
                       out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    np.testing.assert_array_equal(y, x[::-1])


def test_semaphore_2d_signal_read_scratch():
    """REGULAR((2, 3)) scratch: each element counts on its own (a
    row-major flattening that mixed elements up would read wrong counts)."""
    def kernel(o_ref, sems):
        for i in range(2):
            for j in range(3):
                pltpu.semaphore_signal(sems.at[i, j], i * 3 + j + 1)
        for i in range(2):
            for j in range(3):
                o_ref[i, j] = pltpu.semaphore_read(sems.at[i, j])
        for i in range(2):
            for j in range(3):
                pltpu.semaphore_wait(sems.at[i, j], i * 3 + j + 1)

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2, 3), jnp.int32),
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                       scratch_shapes=[pltpu.SemaphoreType.REGULAR((2, 3))])()
    np.testing.assert_array_equal(y, np.arange(1, 7).reshape(2, 3))


def test_semaphore_3d_array_traced_index():
    """A (2, 2, 2) array indexed by program ids and an SMEM value."""
    def kernel(s_ref, o_ref, sems):
        i, j = pl.program_id(0), s_ref[0]
        pltpu.semaphore_signal(sems.at[i, j, 1], i + 2)
        o_ref[0, 0] = pltpu.semaphore_read(sems.at[i, j, 1]) + \
            pltpu.semaphore_read(sems.at[i, 1 - j, 1]) * 10
        pltpu.semaphore_wait(sems.at[i, j, 1], i + 2)

    y = pl.pallas_call(
        kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            out_specs=pl.BlockSpec((1, 1), lambda i, s: (i, 0), memory_space=pltpu.SMEM),
            scratch_shapes=[pltpu.SemaphoreType.REGULAR((2, 2, 2))]),
        out_shape=jax.ShapeDtypeStruct((2, 1), jnp.int32))(np.array([1], np.int32))
    np.testing.assert_array_equal(y, [[2], [3]])


def test_dma_with_scalar_semaphore_ref():
    """tpu_pallas_test.py PallasCallDMATest.test_dma_with_scalar_semaphore_ref."""
    def kernel(x_hbm_ref, y_hbm_ref):
        def body(sem):
            pltpu.async_copy(x_hbm_ref.at[pl.ds(8), :], y_hbm_ref.at[:, pl.ds(128)],
                             sem.at[0]).wait()
        pltpu.run_scoped(body, pltpu.SemaphoreType.DMA((1,)))

    x = np.arange(8 * 128.0, dtype=np.float32).reshape((8, 128))
    y = pl.pallas_call(kernel, in_specs=[_ANY], out_specs=_ANY,
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_array_equal(y, x)


def test_cannot_dma_with_nonscalar_semaphore_ref():
    """tpu_pallas_test.py PallasCallDMATest.
    test_cannot_dma_with_nonscalar_semaphore_ref."""
    def kernel(x_hbm_ref, y_hbm_ref):
        def body(sem):
            pltpu.async_copy(x_hbm_ref.at[pl.ds(8), :], y_hbm_ref.at[:, pl.ds(128)],
                             sem).wait()
        pltpu.run_scoped(body, pltpu.SemaphoreType.DMA((1,)))

    x = np.arange(8 * 128.0, dtype=np.float32).reshape((8, 128))
    with pytest.raises(pl.TraceError, match="Cannot signal"):
        pl.pallas_call(kernel, in_specs=[_ANY], out_specs=_ANY,
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)


def test_semaphore_array_partly_indexed_is_refused():
    """sems.at[i] of a 2-D array names a row, not one semaphore."""
    def kernel(o_ref, sems):
        pltpu.semaphore_signal(sems.at[1])
        o_ref[0] = pltpu.semaphore_read(sems.at[1, 0])

    with pytest.raises(Exception, match=r"semaphore 'sems': name one element, sems.at\[i, j\]"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                       scratch_shapes=[pltpu.SemaphoreType.REGULAR((2, 3))])()


def test_semaphore_read_held_across_a_signal_is_refused():
    """A count read with semaphore_read and used after a signal changed it
    would be stale: refused with a message, never silently the new count."""
    def kernel(o_ref, sems):
        n = pltpu.semaphore_read(sems.at[0, 1])
        pltpu.semaphore_signal(sems.at[0, 1], 2)
        o_ref[0] = n
        pltpu.semaphore_wait(sems.at[0, 1], 2)

    with pytest.raises(Exception, match="reads 'sems', which statement 2 changed"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                       scratch_shapes=[pltpu.SemaphoreType.REGULAR((2, 3))])()
