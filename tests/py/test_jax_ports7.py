# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU tests, seventh round (tests/pallas/
tpu_pallas_test.py PallasCallDMATest, PallasCallTest and
PallasCallDynamicGridTest; ops_test.py OpsTest), each named after the test
it ports, with a NumPy reference: run_scoped allocations and semaphores,
DMAs between HBM, VMEM and SMEM, hoisted scratch, reductions of broadcast
values, elementwise ops. Gaps are strict xfails naming them."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

F32 = jnp.float32


def _arange(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# --- tpu_pallas_test.py PallasCallDMATest ---

def test_run_scoped_can_return_padded_vector_values():
    """PallasCallDMATest.test_run_scoped_can_return_padded_vector_values:
    a (17, 128) int32 scratch, not a multiple of the tile's rows."""
    def kernel(y_ref):
        def body(x_ref):
            x_ref[...] = jnp.ones_like(x_ref)
            return x_ref[...] + 1
        y_ref[...] = pl.run_scoped(body, pltpu.VMEM((17, 128), jnp.int32))

    o = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM)),
        out_shape=jax.ShapeDtypeStruct((17, 128), jnp.int32))()
    np.testing.assert_array_equal(o, np.full((17, 128), 2, np.int32))


def test_nested_scoped_allocation():
    """PallasCallDMATest.test_nested_scoped_allocation."""
    def kernel(y_ref):
        def body(x_ref):
            x_ref[...] = jnp.zeros_like(x_ref)

            def inner_body(z_ref):
                z_ref[...] = jnp.ones_like(z_ref)
                x_ref[...] = z_ref[...]
            pl.run_scoped(inner_body, pltpu.VMEM((8, 128), F32))
            y_ref[...] = 4 * x_ref[...]
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32))

    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))()
    np.testing.assert_allclose(o, 4 * np.ones((8, 128), np.float32))


def test_can_allocate_semaphore():
    """PallasCallDMATest.test_can_allocate_semaphore."""
    def kernel(y_ref):
        def body(sem1):
            pass
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    jax.block_until_ready(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))())


def test_can_allocate_multiple_semaphores():
    """PallasCallDMATest.test_can_allocate_multiple_semaphores."""
    def kernel(y_ref):
        def body(sem1, sem2):
            pass
        pl.run_scoped(body, pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.REGULAR)

    jax.block_until_ready(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))())


def test_can_allocate_semaphore_array():
    """PallasCallDMATest.test_can_allocate_semaphore_array: the arrays'
    shapes and their dtypes (pltpu.dma_semaphore, pl.semaphore)."""
    seen = {}

    def kernel(y_ref):
        def body(dma_sems, sems):
            seen["shapes"] = (dma_sems.shape, sems.shape)
            seen["dma"] = jnp.issubdtype(dma_sems.dtype, pltpu.dma_semaphore)
            seen["reg"] = jnp.issubdtype(sems.dtype, pl.semaphore)
        pl.run_scoped(body, pltpu.SemaphoreType.DMA((4,)),
                      pltpu.SemaphoreType.REGULAR((3,)))

    jax.block_until_ready(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))())
    assert seen == {"shapes": ((4,), (3,)), "dma": True, "reg": True}


def test_can_allocate_scratch_semaphore_array():
    """PallasCallDMATest.test_can_allocate_scratch_semaphore_array."""
    seen = {}

    def kernel(y_ref, dma_sems, sems):
        seen["shapes"] = (tuple(dma_sems.shape), tuple(sems.shape))
        seen["dma"] = jnp.issubdtype(dma_sems.dtype, pltpu.dma_semaphore)
        seen["reg"] = jnp.issubdtype(sems.dtype, pl.semaphore)

    jax.block_until_ready(pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), F32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            scratch_shapes=[pltpu.SemaphoreType.DMA((4,)),
                            pltpu.SemaphoreType.REGULAR((3,))]))())
    assert seen == {"shapes": ((4,), (3,)), "dma": True, "reg": True}


def test_can_wait_on_semaphore():
    """PallasCallDMATest.test_can_wait_on_semaphore."""
    def kernel(y_ref):
        def body(sem):
            pl.semaphore_signal(sem)
            pl.semaphore_wait(sem)
        pl.run_scoped(body, pltpu.SemaphoreType.REGULAR)

        def body2(sem):
            pl.semaphore_signal(sem, 2)
            pl.semaphore_wait(sem)
            pl.semaphore_wait(sem)
        pl.run_scoped(body2, pltpu.SemaphoreType.REGULAR)

        def body3(sem):
            pl.semaphore_signal(sem)
            pl.semaphore_signal(sem)
            pl.semaphore_signal(sem)
            pl.semaphore_wait(sem)
            pl.semaphore_wait(sem)
            pl.semaphore_wait(sem)
        pl.run_scoped(body3, pltpu.SemaphoreType.REGULAR)

    jax.block_until_ready(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))())


def test_can_read_dma_semaphore():
    """PallasCallDMATest.test_can_read_dma_semaphore: a DMA semaphore's
    count after the copy's wait is 0."""
    def kernel(x_hbm_ref, y_hbm_ref, sem_val_ref, dma_sem):
        sem_val_ref[0, 0] = 123
        pltpu.async_copy(x_hbm_ref, y_hbm_ref, dma_sem).wait()
        sem_val_ref[0, 0] = pl.semaphore_read(dma_sem)

    x = _arange((8, 128), np.int32)
    y, sem_val = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=[pl.BlockSpec(memory_space=pl.ANY),
                       pl.BlockSpec(memory_space=pltpu.SMEM)],
            scratch_shapes=[pltpu.SemaphoreType.DMA]),
        out_shape=[jax.ShapeDtypeStruct((8, 128), jnp.int32),
                   jax.ShapeDtypeStruct((1, 1), jnp.int32)])(x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(sem_val, 0)


def test_set_dma_priority():
    """PallasCallDMATest.test_set_dma_priority: async_copy(priority=)."""
    def kernel(x1, x2, y1, y2, scratch1, scratch2, sem1, sem2):
        copy1 = pltpu.async_copy(x1, scratch1, sem1, priority=1)
        copy2 = pltpu.async_copy(x2, scratch2, sem2, priority=0)
        copy1.wait()
        copy2.wait()
        copy1 = pltpu.async_copy(scratch1, y1, sem1, priority=0)
        copy2 = pltpu.async_copy(scratch2, y2, sem2, priority=1)
        copy1.wait()
        copy2.wait()

    shape = (8, 128)
    x1 = _arange(shape, np.int32)
    x2 = x1 + 1
    y1, y2 = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
            scratch_shapes=[pltpu.VMEM(shape, jnp.int32)] * 2
            + [pltpu.SemaphoreType.DMA] * 2,
            out_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2),
        out_shape=[jax.ShapeDtypeStruct(shape, jnp.int32)] * 2)(x1, x2)
    np.testing.assert_array_equal(y1, x1)
    np.testing.assert_array_equal(y2, x2)


def test_hbm_hbm_dma():
    """PallasCallDMATest.test_hbm_hbm_dma: sync_copy between .at windows."""
    def kernel(x_hbm_ref, y_hbm_ref):
        pltpu.sync_copy(x_hbm_ref.at[:8, :], y_hbm_ref.at[:, :128])

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_array_equal(y, x)


def test_hbm_hbm_dma_with_memory_space_annotation_aliased_input():
    """PallasCallDMATest.
    test_hbm_hbm_dma_with_memory_space_annotation_aliased_input: pltpu.HBM
    specs, the aliased output keeps what the copy does not write."""
    def kernel(x_hbm_ref, aliased_y_input, y_hbm_ref):
        del aliased_y_input
        pltpu.sync_copy(x_hbm_ref.at[:2], y_hbm_ref.at[pl.ds(1, 2)])

    x = _arange((8, 128))
    y_init = -_arange((8, 128))
    y_out = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
        out_shape=jax.ShapeDtypeStruct(y_init.shape, y_init.dtype),
        input_output_aliases={1: 0})(x, y_init)
    expected = y_init.copy()
    expected[1:3] = x[:2]
    np.testing.assert_array_equal(y_out.T, expected.T)


def test_hbm_hbm_grid_dma():
    """PallasCallDMATest.test_hbm_hbm_grid_dma: pl.ANY operands under a grid."""
    def kernel(x_hbm_ref, y_hbm_ref):
        i = pl.program_id(0)

        def body(sem):
            pltpu.async_copy(x_hbm_ref.at[pl.ds(i, 1)],
                             y_hbm_ref.at[pl.ds(i, 1)], sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = _arange((2, 8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((2, 8, 128), F32),
        grid=(2,))(x)
    np.testing.assert_allclose(y, x)


def test_hbm_vmem_dma():
    """PallasCallDMATest.test_hbm_vmem_dma."""
    def kernel(x_hbm_ref, y_ref):
        def body(x_ref, sem):
            pltpu.async_copy(x_hbm_ref.at[pl.ds(8), :],
                             x_ref.at[:, pl.ds(128)], sem).wait()
            y_ref[...] = x_ref[...]
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.DMA)

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_vmem_hbm_dma():
    """PallasCallDMATest.test_vmem_hbm_dma."""
    def kernel(x_ref, y_hbm_ref):
        def body(y_ref, sem):
            y_ref[...] = x_ref[...]
            pltpu.async_copy(y_ref, y_hbm_ref, sem).wait()
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.DMA)

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_vmem_hbm_vmem_dma():
    """PallasCallDMATest.test_vmem_hbm_vmem_dma: one DMA semaphore for both
    copies."""
    def kernel(x_hbm_ref, y_hbm_ref):
        def body(x_ref, y_ref, sem):
            pltpu.async_copy(x_hbm_ref, x_ref, sem).wait()
            y_ref[...] = x_ref[...]
            pltpu.async_copy(y_ref, y_hbm_ref, sem).wait()
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.VMEM((8, 128), F32),
                      pltpu.SemaphoreType.DMA)

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_dma_wait_with_regular_semaphore_raises():
    """PallasCallDMATest.test_dma_wait_with_regular_semaphore_raises: a
    copy's .wait() on a REGULAR semaphore is a ValueError naming
    semaphore_wait."""
    def kernel(x_hbm_ref, y_hbm_ref):
        def body(x_ref, sem):
            pltpu.async_copy(x_hbm_ref, x_ref, sem).wait()
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.REGULAR)

    x = _arange((8, 128))
    with pytest.raises(ValueError, match="semaphore_wait"):
        pl.pallas_call(
            kernel,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)


def test_hbm_smem_dma():
    """PallasCallDMATest.test_hbm_smem_dma: an (8, 128) f32 SMEM scratch."""
    def kernel(x_hbm_ref, y_ref):
        def body(x_ref, sem):
            pltpu.async_copy(x_hbm_ref, x_ref, sem).wait()
            y_ref[...] = x_ref[0, 0] * jnp.ones_like(y_ref)
        pl.run_scoped(body, pltpu.SMEM((8, 128), F32), pltpu.SemaphoreType.DMA)

    x = 4 * np.ones((8, 128), np.float32)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_smem_hbm_dma():
    """PallasCallDMATest.test_smem_hbm_dma."""
    def kernel(x_ref, y_hbm_ref):
        def body(y_ref, sem):
            y_ref[0, 0] = 0.0
            y_ref[0, 1] = x_ref[4, 4]
            pltpu.async_copy(y_ref, y_hbm_ref, sem).wait()
        pl.run_scoped(body, pltpu.SMEM((1, 2), F32), pltpu.SemaphoreType.DMA)

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((1, 2), F32))(x)
    np.testing.assert_allclose(y, np.array([[0.0, x[4, 4]]], np.float32))


def test_vmem_vmem_dma():
    """PallasCallDMATest.test_vmem_vmem_dma."""
    def kernel(x_ref, y_ref):
        def body(sem):
            pltpu.async_copy(x_ref, y_ref, sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_hbm_vmem_dma_slicing():
    """PallasCallDMATest.test_hbm_vmem_dma_slicing: two copies in flight on
    one semaphore."""
    def kernel(x_hbm_ref, y_ref):
        def body(sem):
            dma1 = pltpu.async_copy(x_hbm_ref.at[pl.ds(0, 8)], y_ref.at[pl.ds(0, 8)], sem)
            dma2 = pltpu.async_copy(x_hbm_ref.at[pl.ds(8, 8)], y_ref.at[pl.ds(8, 8)], sem)
            dma1.wait()
            dma2.wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = _arange((16, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct((16, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_hbm_vmem_dma_indexing():
    """PallasCallDMATest.test_hbm_vmem_dma_indexing: x_hbm.at[0] drops the
    leading dimension."""
    def kernel(x_hbm_ref, y_ref):
        def body(sem):
            dma1 = pltpu.async_copy(x_hbm_ref.at[0], y_ref.at[pl.ds(0, 8)], sem)
            dma2 = pltpu.async_copy(x_hbm_ref.at[1], y_ref.at[pl.ds(8, 8)], sem)
            dma1.wait()
            dma2.wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = _arange((2, 8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct((16, 128), F32))(x)
    np.testing.assert_allclose(y, x.reshape((16, 128)))


def test_hoisted_scratch_space():
    """PallasCallDMATest.test_hoisted_scratch_space: VMEM scratch lives
    across the grid's steps."""
    def kernel(x_ref, y_ref, scratch_ref):
        i = pl.program_id(0)

        @pl.when(i == 0)
        def _():
            scratch_ref[...] = x_ref[...]
        scratch_ref[...] += jnp.ones_like(scratch_ref)

        @pl.when(i == 2)
        def _():
            y_ref[...] = scratch_ref[...]

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
            scratch_shapes=[pltpu.VMEM((8, 128), F32)],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
            grid=(3,)),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_array_equal(y, x + 3)


def test_hoisted_smem_space():
    """PallasCallDMATest.test_hoisted_smem_space: an SMEM scratch element
    set from program_id, broadcast into a squeezed (None, 8, 128) block."""
    def kernel(y_ref, scratch_ref):
        scratch_ref[0, 0] = pl.program_id(0)
        y_ref[...] = jnp.broadcast_to(scratch_ref[0, 0], y_ref.shape)

    y = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[],
            scratch_shapes=[pltpu.SMEM((1, 1), jnp.int32)],
            out_specs=pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0)),
            grid=(2,)),
        out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.int32))()
    expected = np.broadcast_to(np.arange(2, dtype=np.int32)[:, None, None], (2, 8, 128))
    np.testing.assert_array_equal(y, expected)


def test_hoisted_semaphore():
    """PallasCallDMATest.test_hoisted_semaphore: REGULAR and DMA semaphore
    scratch."""
    def kernel(x_bbm_ref, y_ref, sem, dma_sem):
        pl.semaphore_signal(sem)
        pl.semaphore_wait(sem)
        pltpu.async_copy(x_bbm_ref, y_ref, dma_sem).wait()

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            scratch_shapes=[pltpu.SemaphoreType.REGULAR, pltpu.SemaphoreType.DMA],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM)),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_array_equal(y, x)


def test_large_array_indexing_small():
    """PallasCallDMATest.test_large_array_indexing, at a size for the host
    sim: x.at[index[0]] of a prefetched index copies one slab of a 3-D bf16
    array."""
    n = 3
    x = np.broadcast_to(np.arange(n, dtype=np.float32)[:, None, None], (n, 64, 256))
    xb = jax.to_bf16(np.ascontiguousarray(x))

    def kernel(index, x, y, sem):
        pltpu.async_copy(x.at[index[0]], y.at[:], sem).wait()

    run = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA]),
        out_shape=jax.ShapeDtypeStruct(x.shape[1:], jnp.bfloat16))
    for i in range(n):
        y = run(np.array([i], np.int32), xb)
        np.testing.assert_array_equal(jax.from_bf16(y), i)


def test_dynamic_dma_on_2nd_minor():
    """PallasCallDMATest.test_dynamic_dma_on_2nd_minor: a copy whose size is
    an SMEM value."""
    def kernel(array, data, index, size, _, sem):
        pltpu.async_copy(data.at[pl.ds(0, size[0])],
                         array.at[pl.ds(index[0], size[0])], sem).wait()

    array = np.zeros((1024, 128), np.int32)
    data = np.ones((8, 128), np.int32)
    index = np.array([3], np.int32)
    size = np.array([5], np.int32)
    result = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(array.shape, array.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pltpu.VMEM),
                  pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec(memory_space=pltpu.SMEM)],
        scratch_shapes=[pltpu.SemaphoreType.DMA],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        input_output_aliases={0: 0})(array, data, index, size)
    expected = array.copy()
    expected[3:8] = 1
    np.testing.assert_array_equal(result, expected)


def test_empty_ref_allocation():
    """PallasCallDMATest.test_empty_ref_allocation: jax.empty_ref in a
    kernel is a VMEM scratch."""
    def kernel(y_ref):
        x_ref = jax.empty_ref(jax.ShapeDtypeStruct(y_ref.shape, y_ref.dtype),
                              memory_space=pltpu.VMEM)
        x_ref[...] = jnp.ones_like(x_ref)
        y_ref[...] = 4 * x_ref[...]

    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))()
    np.testing.assert_allclose(o, 4 * np.ones((8, 128), np.float32))


def test_2d_vmem_column_write():
    """PallasCallDMATest.test_2d_vmem_column_write: columns of an (8, 4)
    scratch stored from a 1-D input plus a constant."""
    nrows, ncols = 8, 4

    def kernel(in_ref, out_ref):
        scratch = jax.empty_ref(jax.ShapeDtypeStruct((nrows, ncols), jnp.int32),
                                memory_space=pltpu.VMEM)
        for i in range(ncols):
            scratch[:nrows, i] = in_ref[...] + i
        out_ref[...] = scratch[...]

    x = np.arange(nrows, dtype=np.int32)
    y = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((nrows, ncols), jnp.int32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        grid=(1,))(x)
    np.testing.assert_array_equal(y, np.arange(nrows)[:, None] + np.arange(ncols)[None, :])


def test_select_ref():
    """PallasCallDMATest.test_select_ref: pl.select_ref(i, *refs) in a
    pl.loop picks the copy's source and semaphore."""
    num_refs = 4

    def kernel(*hbm_refs):
        *x_hbm_refs, y_hbm_ref = hbm_refs

        def body(sem):
            @pl.loop(0, num_refs)
            def _(i):
                pltpu.async_copy(pl.select_ref(i, *x_hbm_refs),
                                 y_hbm_ref.at[pl.ds(8 * i, 8)],
                                 pl.select_ref(i, sem.at[0], sem.at[1])).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA(2))

    x = _arange((8 * num_refs, 128), np.int32)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)] * num_refs,
        out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
        out_shape=jax.ShapeDtypeStruct((8 * num_refs, 128), jnp.int32),
    )(*np.split(x, num_refs))
    np.testing.assert_array_equal(y, x)


# --- tpu_pallas_test.py PallasCallTest ---

@pytest.mark.parametrize("shape", [(4, 2, 9), (1, 1025), (1024, 1024)], ids=str)
@pytest.mark.parametrize("dty", [np.float32, np.int32], ids=["f32", "i32"])
def test_double_replicated_reduction(shape, dty):
    """PallasCallTest.test_double_replicated_reduction: jnp.sum of a
    jnp.full constant, broadcast into a 1-D block of a grid."""
    vregs_in_block, total_vregs = 2, 4
    data_size = total_vregs * 1024
    block_size = vregs_in_block * 1024

    def body(o_ref):
        x = jnp.full(shape, 2.0, dtype=dty)
        reduction = jnp.sum(x, axis=None)
        o_ref[:] = jnp.full((block_size,), reduction)

    z = pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct((data_size,), dty),
        in_specs=[],
        out_specs=pl.BlockSpec((block_size,), lambda i: i),
        grid=data_size // block_size)()
    np.testing.assert_allclose(z, np.full((data_size,), 2 * np.prod(shape), dty))


def test_scalar_any_input():
    """PallasCallTest.test_scalar_any_input: a (1,) f32 HBM input copied
    into an SMEM output."""
    def kernel(src, dst, sem):
        pltpu.async_copy(src, dst, sem).wait()

    x = np.full((1,), 3.1415, np.float32)
    y = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, F32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.SemaphoreType.DMA],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))(x)
    np.testing.assert_array_equal(y, x)


def test_sum_in_smem():
    """PallasCallTest.test_sum_in_smem: a running int32 sum of an int16
    SMEM input's elements, stored element by element."""
    def kernel(x, out):
        a = jnp.array(0, dtype=jnp.int32)
        for i in range(4):
            for j in range(4):
                out[i, j] = a.astype(out.dtype)
                a += x[i, j].astype(jnp.int32)

    x = np.ones((4, 4), np.int16)
    spec = pl.BlockSpec(memory_space=pltpu.SMEM)
    y = pl.pallas_call(kernel, in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_array_equal(y, np.arange(16, dtype=np.int32).reshape(4, 4))


def test_sum_in_smem_int32():
    """test_sum_in_smem with an int32 input (the running sum of all 16)."""
    def kernel(x, out):
        a = jnp.array(0, dtype=jnp.int32)
        for i in range(4):
            for j in range(4):
                out[i, j] = a.astype(out.dtype)
                a += x[i, j].astype(jnp.int32)

    x = np.ones((4, 4), np.int32)
    spec = pl.BlockSpec(memory_space=pltpu.SMEM)
    y = pl.pallas_call(kernel, in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_array_equal(y, np.arange(16, dtype=np.int32).reshape(4, 4))


def test_jnp_array_constants_in_a_kernel():
    """jnp.array of a Python number in a kernel body: a scalar of the
    dtype (a running sum of SMEM elements, a float scale); of a traced
    value, the value cast."""
    def kernel(x, v_ref, out, o2_ref):
        a = jnp.array(0, dtype=jnp.int32)
        for i in range(2):
            for j in range(2):
                out[i, j] = a.astype(out.dtype)
                a += x[i, j]
        o2_ref[...] = jnp.array(2.5) * jnp.asarray(v_ref[...], dtype=jnp.float32) + \
            jnp.array(1, jnp.float32)

    x = np.full((2, 2), 3, np.int32)
    v = _arange((8, 128), np.int32)
    spec = pl.BlockSpec(memory_space=pltpu.SMEM)
    y, y2 = pl.pallas_call(
        kernel, in_specs=[spec, pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=[spec, pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct((8, 128), F32)])(x, v)
    np.testing.assert_array_equal(y, [[0, 3], [6, 9]])
    np.testing.assert_allclose(y2, 2.5 * v + 1)
    assert jnp.array(3).dtype == np.int32 and jnp.array(1.5).dtype == np.float32


def test_issubdtype_in_a_kernel():
    """jnp.issubdtype of a ref's dtype in a body picks a branch while
    tracing (as in JAX's kernels: integer or floating paths)."""
    def kernel(x_ref, o_ref):
        if jnp.issubdtype(x_ref.dtype, jnp.floating):
            o_ref[...] = x_ref[...] * 2
        else:
            o_ref[...] = x_ref[...] + 1

    for dt in (np.float32, np.int32):
        x = _arange((8, 128), dt)
        y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        np.testing.assert_array_equal(y, x * 2 if dt == np.float32 else x + 1)
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert not jnp.issubdtype(jnp.uint8, jnp.signedinteger)


@pytest.mark.parametrize("m", [128, 256])
@pytest.mark.parametrize("replicated", [(True, True), (False, True), (True, False)], ids=str)
@pytest.mark.parametrize("reduced_dims", [(0, 1), (0,), (1,)], ids=str)
@pytest.mark.parametrize("dty", [np.float32, np.int32], ids=["f32", "i32"])
@pytest.mark.parametrize("reduce_func", [jnp.sum, jnp.max, jnp.min], ids=["sum", "max", "min"])
def test_replicated_broadcast_reduction(m, replicated, reduced_dims, dty, reduce_func):
    """PallasCallTest.test_replicated_broadcast_reduction: a row, column or
    scalar block broadcast to (m, m), reduced over a tuple of axes."""
    in_shape = (1 if replicated[0] else m, 1 if replicated[1] else m)
    red_shape = [m, m]
    for d in reduced_dims:
        red_shape[d] = 1

    def body(x_ref, o_ref):
        x = x_ref[:]
        dilated_x = jnp.broadcast_to(x, (m, m))
        o_ref[:] = reduce_func(dilated_x, axis=reduced_dims).reshape(red_shape)

    x = np.full(in_shape, 2.0, dty)
    y = pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct(tuple(red_shape), dty),
        in_specs=[pl.BlockSpec(in_shape)],
        out_specs=pl.BlockSpec(tuple(red_shape)),
        grid=1)(x)
    np_func = {jnp.sum: np.sum, jnp.max: np.max, jnp.min: np.min}[reduce_func]
    expected = np_func(np.broadcast_to(x, (m, m)), axis=reduced_dims).reshape(red_shape)
    np.testing.assert_allclose(y, expected)


# --- tpu_pallas_test.py PallasCallDynamicGridTest ---

def test_can_query_grid_statically_via_num_programs_in_block_spec():
    """PallasCallDynamicGridTest.
    test_can_query_grid_statically_via_num_programs_in_block_spec: in an
    index map pl.num_programs of a static grid is a Python int."""
    seen = []

    def kernel(*_):
        pass

    def x_index_map(_):
        num_programs = pl.num_programs(0)
        seen.append(num_programs)
        return 0, 0

    pl.pallas_call(kernel, in_specs=[pl.BlockSpec((8, 128), x_index_map)],
                   out_shape=None, grid=(2,))(np.ones((8, 128), np.float32))
    assert seen and all(isinstance(n, int) and n == 2 for n in seen)


def test_select_ref_smem_index():
    """PallasCallDMATest.test_select_ref_smem_index: the source picked by
    an SMEM value."""
    def kernel(idx_ref, x0_hbm_ref, x1_hbm_ref, y_hbm_ref):
        def body(sem):
            x_hbm_ref = pl.select_ref(idx_ref[0], x0_hbm_ref.at[0:8], x1_hbm_ref)
            pltpu.async_copy(x_hbm_ref, y_hbm_ref, sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x0 = _arange((8, 128))
    x1 = np.zeros((8, 128), np.float32)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec(memory_space=pltpu.HBM),
                  pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(np.array([0], np.int32), x0, x1)
    np.testing.assert_allclose(y, x0)


def test_dma_with_regular_semaphore():
    """PallasCallDMATest.test_dma_with_regular_semaphore (TPU v6+: a DMA
    signals a REGULAR semaphore by 1 when done; tpuemu's device signals DMA
    semaphores only, so the copy is waited for at its start, then the
    signal sent)."""
    def kernel(x_hbm_ref, y_hbm_ref):
        def body(x_ref, y_ref, sem):
            pltpu.async_copy(x_hbm_ref, x_ref, sem)
            pl.semaphore_wait(sem)
            y_ref[...] = x_ref[...]
            pltpu.async_copy(y_ref, y_hbm_ref, sem)
            pl.semaphore_wait(sem)
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.VMEM((8, 128), F32),
                      pltpu.SemaphoreType.REGULAR)

    x = _arange((8, 128))
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)
    np.testing.assert_allclose(y, x)


def test_empty_ref_refusals():
    """jax.empty_ref: under pl.when it is refused by name; in a run_scoped
    body it lives until the body returns; outside a kernel it is a ref of
    the host's (tests/py/test_jax_ports8.py)."""
    assert jax.empty_ref(jax.ShapeDtypeStruct((8, 128), F32)).shape == (8, 128)

    def in_when(y_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            r = jax.empty_ref(jax.ShapeDtypeStruct((8, 128), F32))
            r[...] = jnp.ones_like(r)
            y_ref[...] = r[...]

    def in_scope(y_ref):
        def body(s_ref):
            r = jax.empty_ref(jax.ShapeDtypeStruct((8, 128), F32))
            r[...] = jnp.ones_like(r)
            y_ref[...] = r[...] * 2
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32))

    with pytest.raises(pl.TraceError, match="empty_ref"):
        pl.pallas_call(in_when, out_shape=jax.ShapeDtypeStruct((8, 128), F32), grid=(1,))()
    o = pl.pallas_call(in_scope, out_shape=jax.ShapeDtypeStruct((8, 128), F32), grid=(1,))()
    np.testing.assert_array_equal(o, np.full((8, 128), 2, np.float32))


# --- tpu_pallas_test.py PallasCallTest, second part ---

def test_jitted_kernel_with_program_id():
    """PallasCallTest.test_jitted_kernel_with_program_id: a jax.jit body,
    program_id cast to the ref's dtype."""
    @jax.jit
    def body(x_ref, o_ref):
        i = pl.program_id(0).astype(x_ref.dtype)
        o_ref[...] = x_ref[...] + i

    x = np.arange(2048, dtype=np.float32)
    res = pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec((1024,), lambda i: i)],
        out_specs=pl.BlockSpec((1024,), lambda i: i),
        grid=(2,))(x)
    np.testing.assert_allclose(res, x + np.repeat([0.0, 1.0], 1024).astype(np.float32))


def test_fori_loop_unroll_with_program_id():
    """PallasCallTest.test_fori_loop_unroll_with_program_id: fori_loop's
    unroll= argument, program_id in the body."""
    def f(x_ref, y_ref):
        y_ref[...] = x_ref[...]

        def body(i, _):
            pid = pl.program_id(0)
            y_ref[...] += pid + i
        lax.fori_loop(0, 4, body, None, unroll=2)

    y = pl.pallas_call(
        f,
        out_shape=jax.ShapeDtypeStruct((512,), jnp.int32),
        grid=(2,),
        in_specs=(pl.BlockSpec((256,), lambda i: (i,)),),
        out_specs=pl.BlockSpec((256,), lambda i: (i,)))(np.zeros((512,), np.int32))
    np.testing.assert_array_equal(y[:256], np.full((256,), 6, np.int32))
    np.testing.assert_array_equal(y[256:], np.full((256,), 10, np.int32))


@pytest.mark.parametrize("n,unroll", [(5, 0), (5, True), (6, 2), (5, 2)],
                         ids=["full0", "fullTrue", "partial_divides", "partial_remainder"])
def test_fori_loop_unroll(n, unroll):
    """PallasCallTest.test_fori_loop_unroll_full, _partial_divides and
    _partial_remainder (the sums; JAX also reads the MLIR for scf.for): a
    (1,) int32 output accumulating the trip index."""
    def f(x_ref, y_ref):
        y_ref[...] = x_ref[...]

        def body(i, _):
            y_ref[...] += i
        lax.fori_loop(0, n, body, None, unroll=unroll)

    y = pl.pallas_call(f, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32))(
        np.array([0], np.int32))
    assert y[0] == n * (n - 1) // 2


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("reps", [(2,), (1, 2), (2, 1), (2, 2)], ids=str)
def test_tile(dtype, reps):
    """PallasCallTest.test_tile: jnp.tile of an (8, 256) block."""
    def test_kernel(x_ref, o_ref):
        o_ref[...] = jnp.tile(x_ref[...], reps)

    xf = np.arange(2048, dtype=np.float32).reshape((8, 256))
    x = jax.to_bf16(xf) if dtype == "bf16" else xf
    dt = jnp.bfloat16 if dtype == "bf16" else F32
    out_shape = np.tile(xf, reps).shape
    y = pl.pallas_call(test_kernel, out_shape=jax.ShapeDtypeStruct(out_shape, dt))(x)
    y = jax.from_bf16(y) if dtype == "bf16" else y
    np.testing.assert_array_equal(y, np.tile(jax.from_bf16(x) if dtype == "bf16" else x, reps))


_SCALAR_DTYPES = [np.int8, np.int32, np.float32]


@pytest.mark.parametrize("in_dtype", _SCALAR_DTYPES + ["bf16"], ids=str)
@pytest.mark.parametrize("out_dtype", [np.int8, np.int32, np.float32], ids=str)
def test_scalar_casting(in_dtype, out_dtype):
    """PallasCallTest.test_scalar_casting (the int8, int32, bfloat16 and
    float32 cases): an SMEM element cast and stored into an SMEM output."""
    def kernel(x_ref, o_ref):
        o_ref[0] = x_ref[0].astype(out_dtype)

    if in_dtype == "bf16":
        xv = np.array([7], np.float32)
        x = jax.to_bf16(xv)
    else:
        xv = np.asarray([7], dtype=in_dtype)
        if np.issubdtype(in_dtype, np.signedinteger):
            xv = xv * -1
        x = xv
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, out_dtype))(x)
    np.testing.assert_array_equal(y, xv.astype(out_dtype))


@pytest.mark.parametrize("in_dtype", [np.int8, np.int32], ids=str)
def test_scalar_load_upcast(in_dtype):
    """PallasCallTest.test_scalar_load_upcast (int8, int32)."""
    def kernel(x_ref, o_ref):
        o_ref[0, 0] = x_ref[0, 0].astype(o_ref.dtype)

    x = np.asarray([[-1]], dtype=in_dtype)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((1, 1), jnp.int32))(x)
    np.testing.assert_array_equal(y, x.astype(np.int32))


@pytest.mark.parametrize("in_dtype", [np.int8, np.int32], ids=str)
def test_scalar_indirect_load(in_dtype):
    """PallasCallTest.test_scalar_indirect_load (int8, int32): an SMEM
    element indexed by another."""
    def kernel(x_ref, o_ref):
        o_ref[0, 0] = x_ref[0, x_ref[0, 0].astype(jnp.int32)].astype(o_ref.dtype)

    x = np.asarray([[3, 0, 0, 1]], dtype=in_dtype)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((1, 1), jnp.int32))(x)
    np.testing.assert_array_equal(y, x[0, x[0, 0]].astype(np.int32)[None, None])


def test_masked_store():
    """PallasCallTest.test_masked_store: pltpu.store(ref, x, mask=) with a
    mask from SMEM bounds and iotas."""
    shape = (16, 256)
    mask_shape = (10, 130)
    mask_start = (4, 5)

    def body(scalar_ref, x_ref, o_ref):
        o_ref[...] = jnp.full(shape, -1, dtype=F32)
        b0, b1 = scalar_ref[0], scalar_ref[1]
        e0, e1 = b0 + mask_shape[0], b1 + mask_shape[1]
        iota0 = lax.broadcasted_iota(jnp.int32, shape, 0)
        iota1 = lax.broadcasted_iota(jnp.int32, shape, 1)
        mask0 = jnp.logical_and(b0 <= iota0, iota0 < e0)
        mask1 = jnp.logical_and(b1 <= iota1, iota1 < e1)
        pltpu.store(o_ref, x_ref[...], mask=jnp.logical_and(mask0, mask1))

    s = np.array(mask_start, np.int32)
    x = _arange(shape)
    out = pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct(shape, F32),
        grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1))(s, x)
    expected = np.full(shape, -1, np.float32)
    sl = tuple(slice(b, b + n) for b, n in zip(mask_start, mask_shape))
    expected[sl] = x[sl]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32], ids=str)
def test_scalar_integer_addition(dtype):
    """PallasCallTest.test_scalar_integer_addition (int32, uint32; Mosaic
    refuses the narrower ones)."""
    def kernel(x_ref, y_ref):
        y_ref[0] = x_ref[0] + x_ref[0]

    x = np.asarray([3], dtype=dtype)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, dtype))(x)
    np.testing.assert_array_equal(y, x + x)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32], ids=str)
def test_vector_integer_addition(dtype):
    """PallasCallTest.test_vector_integer_addition (int32, uint32; int16
    arrays are a gap)."""
    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...] + x_ref[...]

    x = np.full((128, 16), 7, dtype=dtype)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, dtype))(x)
    np.testing.assert_array_equal(y, x + x)


@pytest.mark.parametrize("fn,ref", [(jnp.maximum, np.maximum), (jnp.minimum, np.minimum)],
                         ids=["max", "min"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float32], ids=str)
def test_max_min_operation(fn, ref, dtype):
    """PallasCallTest.test_max_operation and test_min_operation: of two
    SMEM elements."""
    def kernel(x_ref, y_ref):
        y_ref[0] = fn(x_ref[0], x_ref[1])

    x = np.asarray([242, 87], dtype=dtype)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, dtype))(x)
    np.testing.assert_array_equal(y[0], ref(x[0], x[1]))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.uint8, np.float32, "bf16"],
                         ids=str)
def test_bool_select_operation(dtype):
    """PallasCallTest.test_bool_select_operation: jnp.where of a bool
    block and a block of each dtype, 0 elsewhere."""
    def kernel(condlist, choicelist, out_ref):
        out_ref[...] = jnp.where(condlist[...], choicelist[...], 0)

    shape = (8, 128)
    cond = np.random.default_rng(0).random(shape) < 0.5
    if dtype == "bf16":
        choice_f = np.arange(1024, dtype=np.float32).reshape(shape) % 256
        choice, dt = jax.to_bf16(choice_f), jnp.bfloat16
    else:
        choice = (np.arange(1024) % (256 if np.dtype(dtype).itemsize == 1 else 4096)
                  ).astype(dtype).reshape(shape)
        dt = dtype
    z = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dt))(cond, choice)
    if dtype == "bf16":
        np.testing.assert_array_equal(jax.from_bf16(z), np.where(cond, choice_f, 0))
    else:
        np.testing.assert_array_equal(z, np.where(cond, choice, 0))


@pytest.mark.parametrize("input_shape", [
    (128, 128),
    (3, 4, 256),
    (8, 5, 8, 10)], ids=str)
def test_bool_transpose_last_two_dims(input_shape):
    """PallasCallTest.test_bool_transpose_last_two_dims."""
    rank = len(input_shape)
    axes = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    out_shape = input_shape[:-2] + (input_shape[-1], input_shape[-2])

    def transpose_kernel(x_ref, y_ref):
        y_ref[...] = jnp.transpose(x_ref[...], axes)

    x = np.random.default_rng(42).random(input_shape) < 0.5
    y = pl.pallas_call(transpose_kernel,
                       out_shape=jax.ShapeDtypeStruct(out_shape, jnp.bool_))(x)
    np.testing.assert_array_equal(y, np.transpose(x, axes))


_INT_OPS = {
    "andi": (lambda a, b: a & b, 1 & 2),
    "divi": (lambda a, b: a // b, 0),
    "max": (jnp.maximum, 2),
    "min": (jnp.minimum, 1),
    "muli": (lambda a, b: a * b, 2),
    "ori": (lambda a, b: a | b, 3),
    "shli": (lambda a, b: a << b, 4),
    "shri": (lambda a, b: a >> b, 0),
    "xori": (lambda a, b: a ^ b, 3),
}


@pytest.mark.parametrize("op", sorted(_INT_OPS) + ["subi"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint32], ids=str)
def test_op_canonicalization(op, dtype):
    """PallasScalarIOpsTest.test_{andi,divi,max,min,muli,ori,shli,shri,
    subi,xori}_op_canonicalization, the i32 and u32 cases: SMEM scalars
    x[1] op x[2] of arange(3)."""
    if op == "subi":
        fn, result = (lambda a, b: b - a), 1
    else:
        fn, result = _INT_OPS[op]

    def kernel(x_ref, y_ref):
        y_ref[0] = fn(x_ref[1], x_ref[2])

    x = np.arange(3, dtype=dtype)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((1,), dtype))(x)
    np.testing.assert_array_equal(y, np.asarray([result], dtype=dtype))


def test_megacore_splitting():
    """PallasMegacoreTest.test_megacore_splitting: vmap of vmap of a
    (4, 4, 4)-grid matmul over a (3, 3) batch (uniform inputs from NumPy's
    generator)."""
    rng = np.random.default_rng(0)
    x = rng.random((3, 3, 512, 512), dtype=np.float32)
    y = rng.random((3, 3, 512, 512), dtype=np.float32)

    def matmul_kernel(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            z_ref[...] = jnp.zeros_like(z_ref)
        z_ref[...] += x_ref[...] @ y_ref[...]

    z = jax.vmap(jax.vmap(pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((512, 512), F32),
        grid=(4, 4, 4),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)))))(x, y)
    np.testing.assert_allclose(z, np.matmul(x, y), rtol=1e-5)


def test_scratch_input_vmap():
    """PallasCallVmapTest.test_scratch_input_vmap: vmap of a kernel with a
    VMEM scratch."""
    tile_shape = (128, 128)
    array_shape = (256, 256)

    def add_one_with_scratch(x_ref, o_ref, scratch_ref):
        scratch_ref[...] = jnp.ones_like(scratch_ref[...])
        o_ref[...] = x_ref[...] + scratch_ref[...]

    f = jax.vmap(pl.pallas_call(
        add_one_with_scratch,
        out_shape=jax.ShapeDtypeStruct(array_shape, jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(tile_shape, lambda i, j: (i, j))],
            out_specs=pl.BlockSpec(tile_shape, lambda i, j: (i, j)),
            scratch_shapes=[pltpu.VMEM(tile_shape, dtype=jnp.int32)],
            grid=(2, 2))))
    x = np.ascontiguousarray(np.broadcast_to(np.arange(256, dtype=np.int32), (10, 256, 256)))
    out = f(x)
    np.testing.assert_array_equal(out, x + 1)
    assert out.dtype == np.int32


def test_scalar_bitwise_ops_of_smem_elements():
    """& | ^ << >> of SMEM int32 elements are bitwise (the scalar core has
    no such ops: the vector unit computes them as (1, 1)); & and | of
    scalar compares stay logical, as pl.when conditions need."""
    def kernel(x_ref, y_ref):
        a, b = x_ref[0], x_ref[1]
        y_ref[0] = a & b
        y_ref[1] = a | b
        y_ref[2] = a ^ b
        y_ref[3] = a << 2
        y_ref[4] = b >> 1
        y_ref[5] = (a + 1) | 8
        y_ref[6] = 0

        @pl.when((a == 6) & (b > 2) | (a < 0))
        def _():
            y_ref[6] = 1

    x = np.array([6, 11], np.int32)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((7,), jnp.int32))(x)
    np.testing.assert_array_equal(y, [6 & 11, 6 | 11, 6 ^ 11, 24, 5, 7 | 8, 1])


def test_masked_load_and_store():
    """pl.load(..., mask=, other=) and pl.store(..., mask=) of ref windows:
    the masked-out elements keep their values (a store) or read `other`."""
    def kernel(x_ref, o_ref, o2_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        iota = lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        pl.store(o_ref, (pl.ds(8, 8), slice(None)), x_ref[pl.ds(0, 8), :], mask=iota < 5)
        o2_ref[...] = pl.load(x_ref, (pl.ds(8, 8), slice(None)), mask=iota >= 120,
                              other=-1.0)

    x = _arange((16, 128))
    o, o2 = pl.pallas_call(
        kernel,
        out_shape=[jax.ShapeDtypeStruct((16, 128), F32),
                   jax.ShapeDtypeStruct((8, 128), F32)])(x)
    exp = np.zeros((16, 128), np.float32)
    exp[8:, :5] = x[:8, :5]
    np.testing.assert_array_equal(o, exp)
    np.testing.assert_array_equal(o2, np.where(np.arange(128) >= 120, x[8:], -1.0))


# --- ops_test.py OpsTest ---

_NEXTAFTER_VALUES = (-3.2, -0., 0., 5.1, np.nan, np.inf, -np.inf)


@pytest.mark.parametrize("x", _NEXTAFTER_VALUES, ids=str)
@pytest.mark.parametrize("y", _NEXTAFTER_VALUES, ids=str)
def test_nextafter(x, y):
    """OpsTest.test_nextafter (float32): exact equality with NumPy's."""
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.nextafter(x_ref[...], y_ref[...])

    xs = np.full((4,), x, np.float32)
    ys = np.full((4,), y, np.float32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4,), F32))(xs, ys)
    np.testing.assert_array_equal(out.view(np.int32) if not np.isnan(out).any() else out,
                                  np.nextafter(xs, ys).view(np.int32)
                                  if not np.isnan(out).any() else np.nextafter(xs, ys))


_SUB32 = ["int8", "uint8", "bf16", "bool"]
_TO = ["float32", "int32", "uint32", "bf16", "int8", "uint8", "bool"]


def _np_of(name):
    return {"bf16": np.float32, "bool": np.bool_}.get(name, np.dtype(name).type)


def _dt_of(name):
    return {"bf16": jnp.bfloat16, "bool": jnp.bool}.get(name) or getattr(jnp, name)


@pytest.mark.parametrize("from_dtype,to_dtype",
                         [(f, t) for f in _SUB32 for t in _TO if f != t])
def test_cast_from_sub_32bit(from_dtype, to_dtype):
    """OpsTest.test_cast_from_sub_32bit, exhaustive over the 8-bit types'
    values (bf16: every finite bit pattern's upper half sampled; bool:
    JAX's pattern), to the dtypes this device has."""
    if from_dtype in ("int8", "uint8"):
        x = np.arange(256, dtype=np.uint8).view(from_dtype).reshape(8, -1)
        x_dev = x
        xv = x
    elif from_dtype == "bf16":
        bits = (np.arange(0, 65536, 37, dtype=np.uint32)[:1024]).astype(np.uint16)
        xv32 = (bits.astype(np.uint32) << 16).view(np.float32)
        bits = np.where(np.isnan(xv32), 0, bits).astype(np.uint16)
        x_dev = bits.reshape(8, 128)
        xv = (x_dev.astype(np.uint32) << 16).view(np.float32)
    else:
        xv = np.tile(np.asarray([[False, True], [True, False]]), (8, 8))
        x_dev = xv.astype(np.int32)

    def kernel(x_ref, y_ref):
        v = x_ref[...]
        if from_dtype == "bool":
            v = v.astype(jnp.bool_)
        y = v.astype(_dt_of(to_dtype))
        if to_dtype == "bool":
            y = y.astype(jnp.int32)
        y_ref[...] = y

    y_dt = jnp.int32 if to_dtype == "bool" else _dt_of(to_dtype)
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x_dev.shape, y_dt))(x_dev)
    if to_dtype == "bf16":
        y = jax.from_bf16(y)
        want = jax.from_bf16(jax.to_bf16(xv.astype(np.float32)))
    elif to_dtype == "bool":
        y = y.astype(bool)
        want = xv.astype(bool)
    else:
        with np.errstate(invalid="ignore"):
            if from_dtype == "bf16" and to_dtype in ("int32", "uint32", "int8", "uint8"):
                # XLA's float-to-int convert saturates at the type's ends
                info = np.iinfo(to_dtype)
                want = np.clip(np.trunc(xv), info.min, info.max).astype(to_dtype)
            else:
                want = xv.astype(_np_of(to_dtype))
    np.testing.assert_array_equal(y, want)


def _dot_general_ref(x, y, dims):
    """lax.dot_general in NumPy: (contracting, batch) dims, out = batch,
    lhs free, rhs free."""
    (lc, rc), (lb, rb) = dims
    lf = [d for d in range(x.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(y.ndim) if d not in rc and d not in rb]
    xt = np.transpose(x, list(lb) + lf + list(lc))
    yt = np.transpose(y, list(rb) + list(rc) + rf)
    nb = len(lb)
    bs = xt.shape[:nb]
    xm = xt.reshape(bs + (int(np.prod(xt.shape[nb:nb + len(lf)])), -1))
    ym = yt.reshape(bs + (int(np.prod(yt.shape[nb:nb + len(rc)])), -1))
    out = np.matmul(xm.astype(np.float64), ym.astype(np.float64))
    return out.reshape(bs + tuple(x.shape[d] for d in lf) + tuple(y.shape[d] for d in rf))


_MNC = [
    ((8, 8, 256), (256, 128), ([2], [0])),
    ((3, 4, 128), (256, 128), ([2], [1])),
    ((256, 8, 128), (256, 128), ([0], [0])),
    ((128, 8, 128), (256, 128), ([0], [1])),
    ((8, 128), (8, 128, 128), ([1], [2])),
    ((128, 8), (8, 128, 128), ([0], [2])),
    ((8, 128), (128, 8, 128), ([1], [0])),
    ((128, 8), (128, 8, 128), ([0], [0])),
    ((8, 8, 128), (8, 128, 128), ([2], [2])),
    ((8, 8, 128), (128, 8, 128), ([2], [0])),
    ((32, 8, 128), (8, 128, 32), ([0], [2])),
    ((8, 8, 128), (8, 8, 128), ([0], [0])),
    ((2, 128, 128), (2, 128, 128), ([1], [2])),
    ((2, 128, 128), (128, 2, 128), ([1], [0])),
    ((2, 128, 128), (2, 128, 128), ([2], [1])),
    ((128, 2, 128), (2, 128, 128), ([0], [1])),
    ((2, 128, 128), (2, 128, 128), ([1], [1])),
]


def _mnc_params():
    # batch 2 of cases 10 and 11: products of (1024, 1024) (or (1024, 256))
    # a batch element, stored into the output part by part (_store_regrouped)
    # so that they fit the default VMEM limit with the 8 MiB output block
    return [pytest.param(batch, case, id="%s-%d" % (batch, n))
            for batch in (None, 1, 2) for n, case in enumerate(_MNC)]


@pytest.mark.parametrize("batch_size,case", _mnc_params())
def test_dot_general_multiple_non_contracting_dims(batch_size, case):
    """OpsTest.test_dot_general_multiple_non_contracting_dims."""
    x_shape, y_shape, (lc, rc) = case
    if batch_size is not None:
        x_shape, y_shape = (batch_size,) + x_shape, (batch_size,) + y_shape
        dims = (([a + 1 for a in lc], [a + 1 for a in rc]), ([0], [0]))
    else:
        dims = ((lc, rc), ([], []))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(np.float32)
    y = rng.standard_normal(y_shape).astype(np.float32)
    expected = _dot_general_ref(x, y, dims)

    def kernel(x_ref, y_ref, out_ref):
        out_ref[...] = jax.lax.dot_general(x_ref[...], y_ref[...], dimension_numbers=dims)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(expected.shape, F32))(x, y)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)


# --- tpu_pallas_state_test.py CoreMapTest ---

def test_can_create_tensorcore_mesh():
    """CoreMapTest.test_can_create_tensorcore_mesh; a mesh of more cores
    than the device has is refused when it is made here (JAX's fails when
    a kernel on it is lowered)."""
    mesh = pltpu.TensorCoreMesh(axis_name="x")
    assert mesh.axis_name == "x"
    assert mesh.num_cores == jax.devices()[0].num_cores
    if jax.devices()[0].num_cores >= 4:
        assert pltpu.TensorCoreMesh(axis_name="x", num_cores=4).num_cores == 4
    else:
        with pytest.raises(ValueError, match="cores on a device of"):
            pltpu.TensorCoreMesh(axis_name="x", num_cores=4)


def test_kernel_helper_basic():
    """CoreMapTest.test_kernel_helper_basic: pl.kernel as a call and as a
    decorator factory."""
    mesh = pltpu.TensorCoreMesh(axis_name="x")

    def body(x_ref, o_ref):
        pltpu.sync_copy(x_ref, o_ref)

    x = _arange((8, 128), np.int32)
    out_type = jax.ShapeDtypeStruct(x.shape, x.dtype)
    np.testing.assert_array_equal(pl.kernel(body, out_type=out_type, mesh=mesh)(x), x)
    np.testing.assert_array_equal(pl.kernel(out_type=out_type, mesh=mesh)(body)(x), x)


def test_can_query_core_index():
    """CoreMapTest.test_can_query_core_index: each core copies its slice
    and adds its index."""
    mesh = pltpu.TensorCoreMesh(axis_name="x")
    slc_size = 16 // mesh.shape["x"]
    x = _arange((16, 128), np.int32)

    @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh,
               scratch_types=[pltpu.VMEM((slc_size, 128), jnp.int32),
                              pltpu.VMEM((slc_size, 128), jnp.int32),
                              pltpu.SemaphoreType.DMA])
    def kernel(x_ref, y_ref, x_vmem_ref, y_vmem_ref, sem):
        num_cores = jax.lax.axis_size("x")
        slc_size = 16 // num_cores
        core_index = jax.lax.axis_index("x")
        slc = pl.ds(core_index * slc_size, slc_size)
        pltpu.async_copy(x_ref.at[slc], x_vmem_ref, sem).wait()
        y_vmem_ref[...] = x_vmem_ref[...] + jax.lax.axis_index("x")
        pltpu.async_copy(y_vmem_ref, y_ref.at[slc], sem).wait()

    num_cores = jax.devices()[0].num_cores
    expected = (x.reshape((num_cores, -1, 128)) +
                np.arange(num_cores)[:, None, None]).reshape(x.shape)
    np.testing.assert_array_equal(kernel(x), expected)


def test_capture_scalar():
    """CoreMapTest.test_capture_scalar (the TensorCore case): a Python int
    closed over in the body indexes the copy."""
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=1)
    x = _arange((4, 8, 128), np.int32)

    def f(x, i):
        @pl.kernel(out_type=jax.ShapeDtypeStruct((1, *x.shape[1:]), jnp.int32), mesh=mesh)
        def kernel(x_ref, out_ref):
            idx = jax.lax.axis_index("x")
            pltpu.sync_copy(x_ref.at[i], out_ref.at[idx])
        return kernel(x)

    def g(x, i):
        @pl.kernel(out_type=jax.ShapeDtypeStruct((2, *x.shape[1:]), jnp.int32), mesh=mesh)
        def kernel(x_ref, out_ref):
            pltpu.sync_copy(x_ref.at[pl.ds(i, 2)], out_ref)
        return kernel(x)

    for i in range(4):
        np.testing.assert_array_equal(f(x, i)[0], x[i])
    for i in range(3):
        np.testing.assert_array_equal(g(x, i), x[i:i + 2])


def test_kernel_helper_with_scratch():
    """CoreMapTest.test_kernel_helper_with_scratch: scratch_types as a dict."""
    mesh = pltpu.TensorCoreMesh(axis_name="x")

    def body(x_ref, o_ref, scratch_ref):
        pltpu.sync_copy(x_ref, scratch_ref)
        scratch_ref[...] += 1
        pltpu.sync_copy(scratch_ref, o_ref)

    x = _arange((8, 128), np.int32)
    result = pl.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh,
                       scratch_types=dict(scratch_ref=pltpu.VMEM(x.shape, jnp.int32)))(x)
    np.testing.assert_array_equal(result, x + 1)


def test_kernel_helper_with_out_tree():
    """CoreMapTest.test_kernel_helper_with_out_tree: a list of outputs."""
    mesh = pltpu.TensorCoreMesh(axis_name="x")

    def body(x_ref, o1_ref, o2_ref, scratch_ref):
        pltpu.sync_copy(x_ref, o1_ref)
        pltpu.sync_copy(x_ref, scratch_ref)
        scratch_ref[...] += 1
        pltpu.sync_copy(scratch_ref, o2_ref)

    x = _arange((8, 128), np.int32)
    t = jax.ShapeDtypeStruct(x.shape, x.dtype)
    result1, result2 = pl.kernel(body, out_type=[t, t], mesh=mesh,
                                 scratch_types=[pltpu.VMEM(x.shape, jnp.int32)])(x)
    np.testing.assert_array_equal(result1, x)
    np.testing.assert_array_equal(result2, x + 1)


# --- tpu_pallas_test.py PallasCallDynamicDMATest, PallasCallRefTransformTest,
# PallasCallTPUBooleanTest ---

def test_simple_tile_aligned_dynamic_size_dma():
    """PallasCallDynamicDMATest.test_simple_tile_aligned_dynamic_size_dma."""
    def kernel(size_smem_ref, x_hbm_ref, _, o_hbm_ref, sem):
        size = size_smem_ref[0]
        pltpu.async_copy(x_hbm_ref.at[pl.ds(0, size)], o_hbm_ref.at[pl.ds(0, size)],
                         sem).wait()

    x = np.ascontiguousarray(np.broadcast_to(np.arange(8, dtype=np.int32)[:, None, None],
                                             (8, 8, 128)))
    o = np.zeros((8, 8, 128), np.int32)
    out = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec(memory_space=pl.ANY),
                      pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA]),
        out_shape=jax.ShapeDtypeStruct(o.shape, o.dtype),
        input_output_aliases={2: 0})(np.array([4], np.int32), x, o)
    expected = o.copy()
    expected[:4] = x[:4]
    np.testing.assert_array_equal(out, expected)


def test_load_reshaped_ref():
    """PallasCallRefTransformTest.test_load_reshaped_ref: x_ref.reshape(5, 128)."""
    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref.reshape(5, 128)[...]

    x = _arange((5, 1, 128), np.int32)
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((5, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, x.reshape(5, 128))


def test_store_reshaped_ref():
    """PallasCallRefTransformTest.test_store_reshaped_ref."""
    def kernel(x_ref, y_ref):
        y_ref.reshape(5, 128)[...] = x_ref[...]

    x = _arange((5, 128), np.int32)
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((5, 1, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, x.reshape(5, 1, 128))


@pytest.mark.parametrize("slice_first", [True, False])
def test_dma_reshaped_ref(slice_first):
    """PallasCallRefTransformTest.test_dma_reshaped_ref: copies between
    reshaped HBM refs and windows of them."""
    def kernel(x_hbm_ref, y_hbm_ref):
        def body(sem):
            ref = (x_hbm_ref.at[:8, :, :].reshape(8, 128) if slice_first
                   else x_hbm_ref.reshape(16, 128).at[:8, :])
            pltpu.async_copy(ref, y_hbm_ref.reshape(8, 128).at[...], sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = _arange((16, 1, 128), np.int32)
    y = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((8, 1, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, x[:8])


@pytest.mark.parametrize("slice_first", [True, False])
def test_store_bitcasted_ref(slice_first):
    """PallasCallRefTransformTest.test_store_bitcasted_ref: bf16 stored
    through an int32 ref bitcast to bf16 (two per word)."""
    def kernel(x_ref, y_ref):
        ref = (y_ref.at[:8, :128].bitcast(jnp.bfloat16) if slice_first
               else y_ref.bitcast(jnp.bfloat16).at[:16, :128])
        ref[...] = x_ref[...]

    x = jax.to_bf16(np.arange(16 * 128, dtype=np.float32).reshape(16, 128))
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 256), jnp.int32))(x)
    expected = x.reshape(8, 2, 128).transpose(0, 2, 1).copy().view(np.int32)[..., 0]
    np.testing.assert_array_equal(y[:8, :128], expected)


@pytest.mark.parametrize("value", [False, True])
def test_scalar_bool_load_store(value):
    """PallasCallTPUBooleanTest.test_scalar_bool_load_store."""
    def kernel(x_ref, o_ref):
        o_ref[0, 0] = jnp.logical_not(x_ref[0, 0])

    x = np.array([[value]])
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((1, 1), jnp.bool_))(x)
    np.testing.assert_array_equal(result, np.logical_not(x))


@pytest.mark.parametrize("value", [False, True])
def test_scalar_bool_run_scoped(value):
    """PallasCallTPUBooleanTest.test_scalar_bool_run_scoped: a bool SMEM
    scratch."""
    def kernel(x_ref, o_ref):
        def inner_scope(scoped_ref):
            scoped_ref[0, 0] = jnp.logical_not(x_ref[0, 0])
            o_ref[0, 0] = scoped_ref[0, 0]
        pl.run_scoped(inner_scope, pltpu.SMEM((1, 1), dtype=jnp.bool_))

    x = np.array([[value]])
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((1, 1), jnp.bool_))(x)
    np.testing.assert_array_equal(result, np.logical_not(x))


def test_vector_bool_load_store():
    """PallasCallTPUBooleanTest.test_vector_bool_load_store."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    x = np.random.default_rng(0).random((8, 128)) < 0.5
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.bool_))(x)
    np.testing.assert_array_equal(result, x)


def test_vector_bool_masking_with_indexing():
    """PallasCallTPUBooleanTest.test_vector_bool_masking_with_indexing:
    o[0, ...] = where(mask[0, ...], a[0, ...], b[0, ...])."""
    def kernel(mask_ref, true_ref, false_ref, o_ref):
        o_ref[0, ...] = jnp.where(mask_ref[0, ...], true_ref[0, ...], false_ref[0, ...])

    rng = np.random.default_rng(3)
    v1 = rng.standard_normal((1, 256, 256)).astype(np.float32)
    v2 = rng.standard_normal((1, 256, 256)).astype(np.float32)
    mask = rng.random((1, 256, 256)) < 0.5
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)] * 3,
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct((1, 256, 256), F32))(mask, v1, v2)
    np.testing.assert_array_equal(result, np.where(mask, v1, v2))


def test_reshaped_ref_refusals():
    """ref.reshape that moves elements between the 2-D view's rows and
    columns reads (and stores) them in row-major order; a window of a
    reshaped ref that keeps its dimensions is the base's window, one that
    cuts dimensions the reshape merges is a window of the base reshaped."""
    def k1(x_ref, y_ref):
        y_ref[...] = x_ref.reshape(8, 64)[...]

    def k2(x_ref, y_ref):
        y_ref[...] = x_ref.reshape(4, 128)[0:2]

    def k4(x_ref, y_ref):
        y_ref[...] = x_ref.reshape(8, 64)[1:2]

    def k5(x_ref, y_ref):
        y_ref[...] = x_ref.reshape(2, 256)[1:2]

    def k3(x_ref, y_ref):
        y_ref.reshape(2, 2, 128)[...] = x_ref[...] * 2

    x = _arange((4, 128), np.int32)
    y = pl.pallas_call(k1, out_shape=jax.ShapeDtypeStruct((8, 64), jnp.int32))(x)
    np.testing.assert_array_equal(y, x.reshape(8, 64))
    y = pl.pallas_call(k3, out_shape=jax.ShapeDtypeStruct((8, 64), jnp.int32))(
        x.reshape(2, 2, 128))
    np.testing.assert_array_equal(y, (x * 2).reshape(8, 64))
    with pytest.raises(pl.TraceError, match="same number of elements"):
        pl.pallas_call(lambda x_ref, y_ref: x_ref.reshape(8, 8),
                       out_shape=jax.ShapeDtypeStruct((8, 64), jnp.int32))(x)
    y = pl.pallas_call(k2, out_shape=jax.ShapeDtypeStruct((2, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, x[0:2])
    y = pl.pallas_call(k5, out_shape=jax.ShapeDtypeStruct((1, 256), jnp.int32))(x)
    np.testing.assert_array_equal(y, x.reshape(2, 256)[1:2])
    # half a row of the base: its window, reshaped
    y = pl.pallas_call(k4, out_shape=jax.ShapeDtypeStruct((1, 64), jnp.int32))(x)
    np.testing.assert_array_equal(y, x.reshape(8, 64)[1:2])


# --- tpu_ops_test.py OpsTest ---

def _roll_ref(x, shift, axis, stride=None, stride_axis=None):
    if stride is None:
        return np.roll(x, shift, axis)
    parts = [np.roll(xs, shift + i * stride, axis)
             for i, xs in enumerate(np.split(x, x.shape[stride_axis], stride_axis))]
    return np.concatenate(parts, stride_axis)


@pytest.mark.parametrize("is_dynamic", [False, True])
@pytest.mark.parametrize("shape,axis,shift", [((32, 512), 0, 9), ((32, 512), 1, 9),
                                              ((32, 512), 1, 3), ((8, 128), 0, 1)], ids=str)
def test_roll(is_dynamic, shape, axis, shift):
    """tpu_ops_test.py OpsTest.test_roll, the 2-D cases without a stride
    (JAX's (4, 4, 32, 512) blocks are rank 4: their last two dimensions
    here), static and prefetched shifts."""
    def kernel(s_ref, x_ref, y_ref):
        amt = s_ref[0] if is_dynamic else shift
        y_ref[...] = pltpu.roll(x_ref[...], amt, axis)

    inp = _arange(shape, np.int32)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(shape, jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1),
    )(np.array([abs(shift)], np.int32), inp)
    np.testing.assert_array_equal(out, _roll_ref(inp, shift, axis))


@pytest.mark.parametrize("stride,stride_axis", [(1, 0), (2, 0)])
def test_roll_strided(stride, stride_axis):
    """tpu_ops_test.py OpsTest.test_roll with stride and stride_axis: row
    i rolled by shift + i * stride along the lanes."""
    def kernel(x_ref, y_ref):
        y_ref[...] = pltpu.roll(x_ref[...], 9, 1, stride=stride, stride_axis=stride_axis)

    inp = _arange((32, 512), np.int32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(inp.shape, jnp.int32))(inp)
    np.testing.assert_array_equal(out, _roll_ref(inp, 9, 1, stride, stride_axis))


def test_interleave_vectors():
    """tpu_ops_test.py OpsTest.test_interleave_vectors: two bf16 blocks
    interleaved through int32 bits."""
    def kernel(x_ref, y_ref, out_ref):
        x = pltpu.bitcast(x_ref[...].astype(jnp.float32), jnp.int32)
        y = pltpu.bitcast(y_ref[...].astype(jnp.float32), jnp.int32)
        shift = jax.lax.broadcast(16, x.shape)
        out_ref[...] = pltpu.bitcast(y | jax.lax.shift_right_logical(x, shift), jnp.bfloat16)

    m, n = 16, 128
    inp = jax.to_bf16(np.arange(m * n * 2, dtype=np.float32).reshape(m, n * 2))
    x, y = np.ascontiguousarray(inp[:, :n]), np.ascontiguousarray(inp[:, n:])
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m * 2, n), jnp.bfloat16))(x, y)
    np.testing.assert_array_equal(out.view(np.uint16), inp.reshape(m * 2, n))


@pytest.mark.parametrize("dtype", [np.int32, np.int8], ids=str)
def test_row_broadcast(dtype):
    """tpu_ops_test.py OpsTest.test_row_broadcast (int32, int8): row 3
    broadcast and cast."""
    def kernel(x_ref, y_ref):
        y_ref[...] = jnp.broadcast_to(x_ref[pl.ds(3, 1)], y_ref.shape).astype(y_ref.dtype)

    m, n = 4, 1152
    x = np.random.default_rng(12).integers(-1000, 1000, (m, n)).astype(dtype)
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32))(x)
    np.testing.assert_array_equal(y, np.broadcast_to(x[3:4].astype(np.int32), y.shape))


def test_select_with_scalar_condition():
    """tpu_ops_test.py OpsTest.test_select_with_scalar_condition: out_shape
    an array (its shape and dtype), name=."""
    def kernel(cond, lhs, rhs, out):
        out[:] = jax.lax.select(cond[0] != 0, lhs[:], rhs[:])

    cond = np.array([1], np.int32)
    lhs = np.zeros((8, 128), np.float32)
    rhs = np.ones((8, 128), np.float32)
    out = pl.pallas_call(
        kernel,
        out_shape=lhs,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.VMEM)]),
        name="select_kernel")(cond, lhs, rhs)
    assert (out == lhs).all()


def test_logical_and_relayouted_mask():
    """tpu_ops_test.py OpsTest.test_logical_and_relayouted_mask."""
    def get_mask(x_ref):
        x = x_ref[...] == 1
        iota = jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 1) > 7
        return jnp.logical_and(x, iota)

    def body(x_ref, y_ref):
        y_ref[...] = jnp.where(get_mask(x_ref), 0.0, -1.0)

    x = _arange((2, 512), np.int32)
    result = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((2, 512), F32))(x)
    mask = (x == 1) & (np.arange(512)[None, :] > 7)
    np.testing.assert_array_equal(result, np.where(mask, 0.0, -1.0))


@pytest.mark.parametrize("dtype", ["float32", "bf16", "int8"])
@pytest.mark.parametrize("shape", [(128, 128), (129, 129)], ids=str)
def test_cast_vector_to_mask(dtype, shape):
    """tpu_ops_test.py OpsTest.test_cast_vector_to_mask, and
    test_i1_relayout_with_bitwidth_change's (129, 129) shape: a mask of the
    data's dtype picks x or zeros in jnp.where."""
    def kernel(x_ref, mask_ref, o_ref):
        zeros = jnp.zeros_like(x_ref)
        o_ref[...] = jnp.where(mask_ref[...], x_ref[...], zeros)

    m = (np.random.default_rng(1234).random(shape) < 0.5)
    xf = (np.arange(np.prod(shape)).reshape(shape) % 100 + 1).astype(np.float32)
    if dtype == "bf16":
        x, mask, dt = jax.to_bf16(xf), jax.to_bf16(m.astype(np.float32)), jnp.bfloat16
    else:
        x, mask, dt = xf.astype(dtype), m.astype(dtype), getattr(jnp, dtype)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dt))(x, mask)
    out = jax.from_bf16(out) if dtype == "bf16" else out
    np.testing.assert_array_equal(out, np.where(m, xf, 0).astype(out.dtype))


@pytest.mark.parametrize("round_", [False, True])
def test_quantize(round_):
    """tpu_ops_test.py OpsTest.test_quantize (int8): every bf16 bit pattern
    (rounded with jnp.rint or not) cast to int8, saturating as XLA's."""
    bits = np.arange(256 * 256, dtype=np.uint16).reshape(256, 256)
    xv = (bits.astype(np.uint32) << 16).view(np.float32)
    bits = np.where(np.isnan(xv), 0, bits).astype(np.uint16)	# NaN's int is unspecified
    xv = (bits.astype(np.uint32) << 16).view(np.float32)
    round_fn = jnp.rint if round_ else (lambda v: v)

    def kernel(x_ref, o_ref):
        o_ref[...] = round_fn(x_ref[...]).astype(jnp.int8)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((256, 256), jnp.int8))(bits)
    r = np.rint(xv) if round_ else np.trunc(xv)
    np.testing.assert_array_equal(out, np.clip(r, -128, 127).astype(np.int8))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reduce_func", ["sum", "max", "min"])
def test_reduction(dtype, axis, reduce_func):
    """tpu_ops_test.py OpsTest.test_reduction: a (2, 16, 128) block reduced
    along one axis with keepdims."""
    in_shape = (2, 16, 128)
    out_shape = list(in_shape)
    out_shape[axis] = 1
    fn = getattr(jnp, reduce_func)

    def kernel(x, out):
        out[:] = fn(x[:], axis, keepdims=True)

    x = _arange(in_shape, np.dtype(dtype))
    result = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(tuple(out_shape), x.dtype))(x)
    np.testing.assert_array_equal(result, getattr(np, reduce_func)(x, axis, keepdims=True))


def test_lax_broadcast_and_broadcast_in_dim():
    """lax.broadcast (leading dimensions) and lax.broadcast_in_dim (a row
    and a column of a block, a scalar)."""
    def kernel(r_ref, c_ref, o1, o2, o3):
        o1[...] = jax.lax.broadcast(3, (8, 128)) + jax.lax.broadcast(r_ref[...], ())
        o2[...] = jax.lax.broadcast_in_dim(c_ref[...], (8, 128), (0, 1))
        o3[...] = jax.lax.broadcast_in_dim(r_ref[...], (8, 128), (0, 1))

    r = np.arange(128, dtype=np.int32).reshape(1, 128)
    c = np.arange(8, dtype=np.int32).reshape(8, 1) * 10
    t = jax.ShapeDtypeStruct((8, 128), jnp.int32)
    o1, o2, o3 = pl.pallas_call(kernel, out_shape=[t, t, t])(r, c)
    np.testing.assert_array_equal(o1, 3 + np.broadcast_to(r, (8, 128)))
    np.testing.assert_array_equal(o2, np.broadcast_to(c, (8, 128)))
    np.testing.assert_array_equal(o3, np.broadcast_to(r, (8, 128)))


# --- pallas_test.py PallasCallTest (the cases a TPU runs) ---

def test_pallas_call_no_outputs():
    """pallas_test.py PallasCallTest.test_pallas_call_no_outputs: out_shape=()."""
    a = np.arange(256, dtype=np.int32)
    f = pl.pallas_call(lambda x_ref: None, ())
    assert f(a) == ()


def test_pallas_call_out_shape_is_singleton_tuple():
    """PallasCallTest.test_pallas_call_out_shape_is_singleton_tuple: an
    array as its own ShapeDtypeStruct, a tuple of one back."""
    a = _arange((8, 128), np.int32)
    res = pl.pallas_call(lambda x_ref, o1_ref: None, out_shape=(a,))(a)
    assert isinstance(res, tuple) and len(res) == 1


def test_pallas_call_out_shape_is_list():
    """PallasCallTest.test_pallas_call_out_shape_is_list: a tuple back (JAX
    normalizes the list)."""
    a = _arange((8, 128), np.int32)
    res = pl.pallas_call(lambda x_ref, o1_ref: None, out_shape=[a])(a)
    assert isinstance(res, tuple) and len(res) == 1


def test_pallas_call_no_grid():
    """PallasCallTest.test_pallas_call_no_grid."""
    seen = []

    def kernel(o_ref):
        seen.append(o_ref.shape)
        o_ref[...] = jnp.full(o_ref.shape, 42, dtype=np.int32)

    out = pl.pallas_call(kernel, jax.ShapeDtypeStruct((8, 128), dtype=np.int32))()
    np.testing.assert_array_equal(out, np.full((8, 128), 42, np.int32))
    assert seen == [(8, 128)]


_BLOCK_SHAPES = [
    ((2,), (2,)), ((128,), (128,)), ((128,), (64,)), ((2, 2), (2, 2)), ((3, 3), (3, 3)),
    ((4, 2), (2, 2)), ((6, 2, 2), (2, 2, 2)), ((6, 2, 2), (3, 2, 2)), ((16, 128), (8, 128)),
    ((6, 16, 128), (2, 8, 128)), ((6, 16, 128), (3, 8, 128)), ((16, 64), (8, 64)),
    ((16, 128), (4, 128)), ((16, 128), (2, 128)), ((16, 128), (8, 64)), ((9, 128), (9, 64)),
    ((9, 128), (9, 128)), ((18, 128), (9, 128)), ((8, 129), (8, 129)), ((9, 129), (8, 129)),
    ((9, 129), (9, 129)), ((1, 128), (4, 128)), ((2, 128), (4, 128)), ((3, 128), (4, 128)),
    ((5, 128), (8, 128)),
]


@pytest.mark.parametrize("shape,block_shape", _BLOCK_SHAPES, ids=str)
def test_block_spec_valid_block_shapes(shape, block_shape):
    """PallasCallTest.test_block_spec_valid_block_shapes (int32): a copy
    by blocks; the blocks Pallas TPU refuses (the last two dimensions
    neither multiples of (8, 128) nor the array's) fail here too, naming
    the tiling."""
    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    grid = [(sd + bd - 1) // bd for sd, bd in zip(shape, block_shape)]
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    bs0, as0 = block_shape[-1], shape[-1]
    bs1, as1 = (block_shape[-2], shape[-2]) if len(shape) >= 2 else (1, 1)
    ok = (bs0 == as0 or bs0 % 128 == 0) and (bs1 == as1 or bs1 % 8 == 0)
    call = pl.pallas_call(
        copy_kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
        in_specs=[pl.BlockSpec(block_shape, lambda *indices: indices)],
        out_specs=pl.BlockSpec(block_shape, lambda *indices: indices))
    if ok:
        np.testing.assert_array_equal(call(x), x)
    else:
        with pytest.raises(jax.TpurtError, match="tiles the last two dimensions|multiple of"):
            call(x)


def test_hoisted_consts():
    """PallasCallTest.test_hoisted_consts: a NumPy array the kernel closes
    over is refused (JAX: "captures constants")."""
    to_store = np.arange(128, dtype=np.float32).reshape((1, 128))
    x = _arange((16, 128))

    def kernel(src, dst):
        dst[0:1] = to_store

    with pytest.raises(pl.TraceError, match="ndarray"):
        pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((64, 128), x.dtype), grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((32, 128), lambda i: (i, 0)))(x)


# --- tpu_pallas_test.py: grid spec trees, memory spaces, compiler params ---

def test_memory_space_like():
    """PallasCallTest.test_memory_space_like: pltpu.VMEM.like(x)."""
    x = jax.ShapeDtypeStruct((2, 3), F32)
    ref = pltpu.VMEM.like(x)
    assert ref.shape == (2, 3)
    assert ref.dtype == F32

    def kernel(x_ref, o_ref, s_ref):
        s_ref[...] = x_ref[...] + 1
        o_ref[...] = s_ref[...]

    a = _arange((8, 128))
    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype),
                       scratch_shapes=[pltpu.VMEM.like(jax.ShapeDtypeStruct(a.shape, F32))])(a)
    np.testing.assert_array_equal(o, a + 1)


def test_with_unhashable_grid_spec():
    """PallasCallScalarPrefetchTest.test_with_unhashable_grid_spec: specs,
    outputs, scratch and scalar prefetch as lists (pytrees): each reaches
    the kernel as a list of refs; the outputs come back as a tuple."""
    seen = {}

    def kernel(s_ref, x_ref, o_ref, scratch_ref):
        seen["types"] = [type(r) for r in (s_ref, x_ref, o_ref, scratch_ref)]
        o_ref[0][...] = x_ref[0][...]

    x = _arange((8, 128), np.int32)
    s = np.array([0, 1], np.int32)
    res = pl.pallas_call(
        kernel,
        out_shape=[[jax.ShapeDtypeStruct((8, 128), np.int32)]],
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(1,),
            in_specs=[[pl.BlockSpec((8, 128), lambda i, s_ref: (0, 0))]],
            out_specs=[[pl.BlockSpec((8, 128), lambda i, s_ref: (0, 0))]],
            scratch_shapes=[[pltpu.SemaphoreType.REGULAR((3,))]]))([s, s], [x])
    assert seen["types"] == [list] * 4
    assert isinstance(res, tuple)
    np.testing.assert_array_equal(res[0][0], x)


@pytest.mark.parametrize("scratch", [True, False])
@pytest.mark.parametrize("vmap", [False, True])
def test_scalar_prefetch_calling_convention(scratch, vmap):
    """PallasCallScalarPrefetchTest.test_scalar_prefetch_calling_convention:
    one scalar-prefetch pytree (an array, another, None), its first array
    indexing the index maps, a (1, 128) row stored at a prefetched row."""
    to_store = np.arange(128, dtype=np.float32).reshape((1, 128))
    x_shape = (4, 16, 128) if vmap else (16, 128)
    x = _arange(x_shape)

    def f(x, grid_size, to_store):
        s = np.array([1, 0], np.int32)

        def kernel(s_refs, src, to_store, dst, *scratch_refs):
            s_ref, s2, s3 = s_refs
            assert s_ref.shape == (2,) and s2.shape == (3,) and s3 is None
            store_idx = s_ref[pl.program_id(0)]
            dst[pl.dslice(store_idx, 1), :] = to_store[...]

        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((64, 128), x.dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(grid_size,),
                in_specs=[pl.BlockSpec((8, 128), lambda i, s_ref: (s_ref[0][i], 0)),
                          pl.BlockSpec((1, 128), lambda i, s_ref: (0, 0))],
                out_specs=pl.BlockSpec((32, 128), lambda i, s_ref: (s_ref[0][i], 0)),
                scratch_shapes=([pltpu.SemaphoreType.REGULAR((3,))] if scratch else []))
        )((s, np.arange(3, dtype=np.int32), None), x, to_store)

    if vmap:
        res = jax.vmap(lambda xi: f(xi, 2, to_store))(x)
        for i in range(x.shape[0]):
            np.testing.assert_array_equal(res[i, 0:1], to_store)
            np.testing.assert_array_equal(res[i, 33:34], to_store)
    else:
        res = f(x, 2, to_store)
        np.testing.assert_array_equal(res[0:1], to_store)
        np.testing.assert_array_equal(res[33:34], to_store)


def test_vmem_limit():
    """PallasCallTest.test_vmem_limit: CompilerParams(vmem_limit_bytes=) too
    small for the blocks fails; a larger one runs."""
    x = _arange((128, 128))

    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...]

    with pytest.raises(jax.TpurtError):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       compiler_params=pltpu.CompilerParams(vmem_limit_bytes=256))(x)
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       compiler_params=pltpu.CompilerParams(vmem_limit_bytes=int(2**18)))(x)
    np.testing.assert_array_equal(y, x)


# --- tpu_pallas_test.py MiscellaneousTest ---

def test_lane_broadcast_bf16():
    """MiscellaneousTest.test_lane_broadcast_bf16: a (256, 1) column to (256, 512)."""
    xf = np.arange(256, dtype=np.float32).reshape(256, 1)

    def kernel(x_ref, out_ref):
        out_ref[...] = jnp.broadcast_to(x_ref[...], (256, 512))

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((256, 512), jnp.bfloat16))(
        jax.to_bf16(xf))
    np.testing.assert_array_equal(jax.from_bf16(out), np.broadcast_to(xf, (256, 512)))


@pytest.mark.parametrize("shape", [(3, 16), (8, 128), (15, 256), (20, 200), (64, 8)], ids=str)
@pytest.mark.parametrize("shift", [0, 1, 9, 129])
@pytest.mark.parametrize("dtype", ["float32", "bf16", "int8"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("is_dynamic", [False, True])
def test_roll_with_no_stride(shape, shift, dtype, axis, is_dynamic):
    """MiscellaneousTest.test_roll_with_no_stride (a subset of its shapes
    and shifts; float32, bf16, int8)."""
    xf = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if dtype == "bf16":
        x, dt = jax.to_bf16(xf), jnp.bfloat16
        xf = jax.from_bf16(x)		# the values bf16 holds
    elif dtype == "int8":
        xf = (xf % 100)
        x, dt = xf.astype(np.int8), jnp.int8
    else:
        x, dt = xf, F32
    if is_dynamic:
        def kernel(x_ref, shift_ref, out_ref):
            out_ref[...] = pltpu.roll(x_ref[...], shift=shift_ref[0], axis=axis)
        out = pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct(shape, dt),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)])(x, np.array([shift], np.int32))
    else:
        def kernel(x_ref, out_ref):
            out_ref[...] = pltpu.roll(x_ref[...], shift=shift, axis=axis)
        out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dt))(x)
    out = jax.from_bf16(out) if dtype == "bf16" else out
    np.testing.assert_array_equal(out, np.roll(xf.astype(out.dtype), shift, axis=axis))


def test_sublane_adding_shape_cast_f32():
    """MiscellaneousTest.test_sublane_adding_shape_cast_f32: out_ref[:, 0, :] = x."""
    x = _arange((8, 128))

    def kernel(x_ref, out_ref):
        out_ref[:, 0, :] = x_ref[:, :]

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 1, 128), F32))(x)
    np.testing.assert_array_equal(out, x.reshape(8, 1, 128))


def test_mixed_strides():
    """MiscellaneousTest.test_mixed_strides: y_ref[:, 1, :] of a bf16 (8, 2, 128)."""
    x = np.full((8, 128), 1.0, np.float32)
    y = jax.to_bf16(np.full((8, 2, 128), 2.0, np.float32))

    def kernel(x_ref, y_ref, out_ref):
        out_ref[:, :] = x_ref[:, :] + y_ref[:, 1, :].astype(jnp.float32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x, y)
    np.testing.assert_array_equal(out, np.full((8, 128), 3.0, np.float32))


def test_retiling1():
    """MiscellaneousTest.test_retiling1: a (1024,) bf16 block reshaped to (8, 128)."""
    xf = np.arange(1024, dtype=np.float32)

    def kernel(x_ref, out_ref):
        out_ref[:, :] = jnp.reshape(x_ref[:].astype(jnp.float32), (8, 128))

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))(jax.to_bf16(xf))
    # JAX's x is np.arange(1024, dtype=bfloat16): rounded (257 is 256)
    np.testing.assert_array_equal(out, jax.from_bf16(jax.to_bf16(xf)).reshape(8, 128))


def test_sum_4d():
    """MiscellaneousTest.test_sum: jnp.sum over axis 2 of an (8, 2, 8, 128) block."""
    x = np.zeros((8, 2, 8, 128), np.float32)

    def kernel(x_ref, out_ref):
        out_ref[:, :, :] = jnp.sum(x_ref[:, :, :, :], 2)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 2, 128), F32))(x)
    np.testing.assert_array_equal(out, np.zeros((8, 2, 128), np.float32))


@pytest.mark.parametrize("m,n", [(5, 512), (9, 256), (11, 128), (1, 64), (200, 1)], ids=str)
def test_reshape_unfold_minor_dim_to_R2(m, n):
    """MiscellaneousTest.test_reshape_unfold_minor_dim_to_R2 (float32): a
    1-D block reshaped to (m, n)."""
    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...].reshape(y_ref.shape)

    x = np.arange(m * n, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), F32))(x)
    np.testing.assert_array_equal(out, x.reshape(m, n))
