# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
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


def test_semaphore_read_held_across_a_signal_keeps_its_count():
    """A count read with semaphore_read and used after a signal changed it
    is the count it read, as in JAX (snapshotted into SMEM where it is
    read; this was refused before, as the stale local it would have been),
    never silently the new count."""
    def kernel(o_ref, sems):
        pltpu.semaphore_signal(sems.at[0, 1], 3)
        n = pltpu.semaphore_read(sems.at[0, 1])
        pltpu.semaphore_signal(sems.at[0, 1], 2)
        o_ref[0] = n
        pltpu.semaphore_wait(sems.at[0, 1], 5)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
                         out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                         scratch_shapes=[pltpu.SemaphoreType.REGULAR((2, 3))])()
    np.testing.assert_array_equal(out, [3])


# --- DMA windows whose starts come from SMEM values ---

def _prefetch_call(kernel, out_shape, out_spec, scratch, grid=(1,)):
    return pl.pallas_call(kernel, out_shape=out_shape, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, in_specs=[_ANY], out_specs=out_spec, grid=grid,
        scratch_shapes=scratch))


@pytest.mark.parametrize("indices", [(2,), (2, 3), (3, 0, 3, 1)])
def test_async_dynamic_slice(indices):
    """tpu_pallas_async_test.py test_async_dynamic_slice and
    test_multi_async_dynamic_slice: x_ref.at[index_ref[k]] copied out,
    the copies in flight together, in one kernel (no semaphore outputs)."""
    n = len(indices)

    def kernel(index_ref, x_ref, o_ref, sems):
        copies = [pltpu.make_async_copy(x_ref.at[index_ref[k]], o_ref.at[k], sems.at[k])
                  for k in range(n)]
        for cp in copies:
            cp.start()
        for cp in copies:
            cp.wait()

    x = _normal((4, 8, 128))
    y = _prefetch_call(kernel, jax.ShapeDtypeStruct((n, 8, 128), jnp.float32), _ANY,
                       [pltpu.SemaphoreType.DMA((n,))])(np.array(indices, np.int32), x)
    np.testing.assert_array_equal(y, x[list(indices)])


def test_async_copy_ds_start_from_scalar_prefetch():
    """The paged-attention gather (JAX's paged_attention kernel): a
    window pl.ds(idx_ref[i] * 8, 8) of an HBM ref per page, into slots of
    a VMEM buffer."""
    pages = np.array([5, 0, 7, 2], np.int32)

    def kernel(idx_ref, x_hbm, o_ref, buf, sem):
        for i in range(4):
            pltpu.make_async_copy(x_hbm.at[pl.ds(idx_ref[i] * 8, 8)], buf.at[i], sem.at[i]).start()
        for i in range(4):
            pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[i], sem.at[i]).wait()
        o_ref[...] = buf[...] * 2.0

    x = _normal((64, 128))
    y = _prefetch_call(kernel, jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),
                       pl.BlockSpec((4, 8, 128), lambda i, s: (0, 0, 0)),
                       [pltpu.VMEM((4, 8, 128), jnp.float32),
                        pltpu.SemaphoreType.DMA((4,))])(pages, x)
    np.testing.assert_array_equal(y, np.stack([x[p * 8:p * 8 + 8] for p in pages]) * 2.0)


def test_gather_rows_by_dma():
    """One row per copy, its start an SMEM element (tpu_pallas_test.py's
    gather-style DMAs): x[idx] on the DMA engine, one semaphore."""
    idx = np.array([3, 40, 0, 17, 63, 2, 2, 9], np.int32)

    def kernel(idx_ref, x_hbm, o_ref, sem):
        for i in range(8):
            pltpu.make_async_copy(x_hbm.at[pl.ds(idx_ref[i], 1)], o_ref.at[pl.ds(i, 1)],
                                  sem).start()
        for i in range(8):
            pltpu.make_async_copy(x_hbm.at[pl.ds(0, 1)], o_ref.at[pl.ds(i, 1)], sem).wait()

    x = _normal((64, 128))
    y = _prefetch_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
                       [pltpu.SemaphoreType.DMA])(idx, x)
    np.testing.assert_array_equal(y, x[idx])


def test_dma_start_from_smem_scratch_and_program_id():
    """Starts computed on the scalar core from SMEM scratch, a prefetched
    value and pl.program_id, in two dimensions, into a squeezed output
    block (BlockSpec((None, 8, 128)))."""
    def kernel(s_ref, x_hbm, o_ref, off_ref, sem):
        off_ref[0] = s_ref[0] * 8
        start = off_ref[0] + pl.program_id(0)
        pltpu.async_copy(x_hbm.at[pl.ds(start, 8), pl.ds(s_ref[1] * 128, 128)], o_ref,
                         sem).wait()

    x = _normal((64, 256))
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((3, 8, 128), jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=1, in_specs=[_ANY], grid=(3,),
                           out_specs=pl.BlockSpec((None, 8, 128), lambda i, s: (i, 0, 0)),
                           scratch_shapes=[pltpu.SMEM((1,), jnp.int32),
                                           pltpu.SemaphoreType.DMA]))(
        np.array([2, 1], np.int32), x)
    np.testing.assert_array_equal(y, np.stack([x[16 + i:24 + i, 128:] for i in range(3)]))


def test_hbm_vmem_dma_multiple_indexing():
    """tpu_pallas_test.py PallasCallDMATest.test_hbm_vmem_dma_multiple_indexing:
    chained windows, x_hbm_ref.at[pl.ds(i, 1)].at[0, 0]."""
    def kernel(x_hbm_ref, y_ref):
        def body(sem):
            for i in range(3):
                dma1 = pltpu.async_copy(x_hbm_ref.at[pl.ds(i, 1)].at[0, 0],
                                        y_ref.at[i].at[pl.ds(0, 8)], sem)
                dma2 = pltpu.async_copy(x_hbm_ref.at[pl.ds(i, 1)].at[0, 1],
                                        y_ref.at[i].at[pl.ds(8, 8)], sem)
                dma1.wait()
                dma2.wait()
        pltpu.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = np.arange(3 * 2 * 8 * 128.0, dtype=np.float32).reshape((3, 2, 8, 128))
    y = pl.pallas_call(kernel, in_specs=[_ANY],
                       out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                       out_shape=jax.ShapeDtypeStruct((3, 16, 128), jnp.float32))(x)
    np.testing.assert_array_equal(y, x.reshape((3, 16, 128)))


def test_chained_window_with_traced_start_and_stride():
    """x.at[pl.ds(s, 16, stride=2)].at[pl.ds(k, 4)]: the starts compose
    (s + 2 * k) and so do the strides, with s an SMEM value."""
    def kernel(s_ref, x_hbm, o_ref, sem):
        w = x_hbm.at[pl.ds(s_ref[0], 16, stride=2)]
        pltpu.async_copy(w.at[pl.ds(3, 8), :], o_ref, sem).wait()

    x = _normal((64, 128))
    y = _prefetch_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
                       [pltpu.SemaphoreType.DMA])(np.array([5], np.int32), x)
    np.testing.assert_array_equal(y, x[5:37:2][3:11])


def test_dma_size_from_smem_is_refused():
    """A copy of a traced pl.ds size into a ref of a static shape (as
    Pallas, the shapes must agree): both named."""
    def kernel(s_ref, x_hbm, o_ref, sem):
        pltpu.async_copy(x_hbm.at[pl.ds(0, s_ref[0])], o_ref, sem).wait()

    with pytest.raises(pl.TraceError, match=r"x_hbm.at\[pl.ds\(0, s_ref\[0\]\)\] has a "
                                            r"traced size and o_ref a static shape"):
        _prefetch_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
                       [pltpu.SemaphoreType.DMA])(np.array([8], np.int32), _normal((64, 128)))


# --- indexing values of rank 3: their own dimensions, not the 2-D view ---

def _x3(shape=(2, 16, 128)):
    return _normal(shape)


@pytest.mark.parametrize("index", [1, (0, slice(8, 16)), (1, slice(None), slice(0, 128)),
                                   (slice(None), 3), (slice(None), slice(8, 16)),
                                   (1, slice(None), 5)])
def test_index_a_whole_read_of_a_3d_block(index):
    """A 3-D block read whole into a local, then indexed (as JAX's batched
    kernels do, x = x_ref[...]; x[b]): numpy's indexing of x, the
    result's rank whatever it drops to."""
    x = _x3()
    want = x[index]

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = v[index]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(want.shape, jnp.float32))(x)
    np.testing.assert_array_equal(y, want)


def test_index_a_bound_read_of_a_3d_input_of_odd_rows():
    """The reported bug: a bound whole read of a (4, 11, 128) input,
    sliced after the output was written ("dimension 0 takes 16 of 11
    elements" when the 2-D view's rows were indexed on the 3-D ref)."""
    x = _x3((4, 11, 128))

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = v[2]
        o_ref[...] = o_ref[...] + v[3, :, :]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((11, 128), jnp.float32))(x)
    np.testing.assert_allclose(y, x[2] + x[3], rtol=1e-6)


def test_index_a_local_copy_of_a_3d_output():
    """A read of a 3-D output bound before the output changes (a local in
    a temporary of the output's three dimensions), then indexed."""
    x = _x3()

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        v = o_ref[...]
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[0, 0:8] = v[1, 8:16]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    want = np.zeros_like(x)
    want[0, 0:8] = x[1, 8:16]
    np.testing.assert_array_equal(y, want)


def test_index_elementwise_results_of_a_3d_read():
    """Element-wise results keep the operand's three dimensions."""
    x = _x3()

    def kernel(x_ref, o_ref):
        v = x_ref[...] * 2.0
        o_ref[...] = jnp.exp(v)[1, 8:16] + v[0, 0:8]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_allclose(y, np.exp(2 * x[1, 8:16]) + 2 * x[0, 0:8], rtol=1e-5, atol=1e-5)


def test_index_a_reshaped_3d_read_uses_the_new_view():
    """x_ref[...].reshape(32, 128)[8:16]: the reshape's 2-D view."""
    x = _x3()

    def kernel(x_ref, o_ref):
        v = x_ref[...].reshape(32, 128)
        o_ref[...] = v[8:16]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_array_equal(y, x.reshape(32, 128)[8:16])


def test_two_slices_of_one_2d_temporary():
    """Two windows of one computed value live at once: the temporaries'
    slots see windows of them as uses (each used to share a slot)."""
    x = _normal((16, 128))

    def kernel(x_ref, o_ref):
        v = x_ref[...] * 2.0
        o_ref[...] = jnp.exp(x_ref[...])[0:8] + v[8:16]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_allclose(y, np.exp(x[0:8]) + 2 * x[8:16], rtol=1e-5, atol=1e-5)


# --- bitcasts of one width: the DMA engine moves the bytes ---

_SAME_WIDTH = [(np.float32, np.int32), (np.int32, np.float32),
               (np.int8, np.uint8), (np.uint8, np.int8)]


@pytest.mark.parametrize("is_ref_bitcast", [False, True])
@pytest.mark.parametrize("from_dtype,to_dtype", _SAME_WIDTH)
def test_bitcast(from_dtype, to_dtype, is_ref_bitcast):
    """tpu_ops_test.py OpsTest.test_bitcast, the pairs of one width
    (in_shape (m * packing, 256) as there), checked against numpy's view."""
    def kernel(x_ref, y_ref):
        if is_ref_bitcast:
            y_ref[...] = x_ref.bitcast(to_dtype)[...]
        else:
            y_ref[...] = pltpu.bitcast(x_ref[...], to_dtype)

    packing = 4 // np.dtype(from_dtype).itemsize
    shape = (packing, 256)
    inp = (np.arange(np.prod(shape)) * 7919 - 3000).astype(from_dtype).reshape(shape)
    if from_dtype is np.float32:
        inp = _normal(shape)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, to_dtype))(inp)
    np.testing.assert_array_equal(out, inp.view(to_dtype))


def test_bitcast_then_integer_ops_clear_the_sign():
    """|x| through the bits (as JAX's kernels do): int32 ops on a float's
    bits, stored back through o_ref.bitcast(jnp.float32)."""
    x = _normal((16, 128))

    def kernel(x_ref, o_ref):
        bits = x_ref.bitcast(jnp.int32)[...]
        o_ref[...] = jax.lax.shift_right_logical(bits << 1, 1)
        o_ref.bitcast(jnp.float32)[...] = o_ref.bitcast(jnp.float32)[...] * 2.0

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y.view(np.float32), np.abs(x) * 2.0)


def test_bitcast_convert_type_of_a_computed_value():
    """lax.bitcast_convert_type of an int32 result: a float32 of its bits."""
    xi = (np.arange(16 * 128, dtype=np.int32) * 1000).reshape(16, 128)

    def kernel(x_ref, o_ref):
        o_ref[...] = jax.lax.bitcast_convert_type(x_ref[...] + 1, jnp.float32)

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(xi)
    np.testing.assert_array_equal(y.view(np.int32), xi + 1)


@pytest.mark.parametrize("to_dtype,rows", [(jnp.bfloat16, 16), (jnp.int8, 32)],
                         ids=["bf16", "int8"])
def test_bitcast_of_another_width(to_dtype, rows):
    """tpu_ops_test.py's width-changing bitcasts: float32 (8, 128) to
    bfloat16 (16, 128) or int8 (32, 128), each word's parts on the rows
    it packs (its low bytes first), as a TPU lays them out."""
    def kernel(x_ref, y_ref):
        y_ref[...] = pltpu.bitcast(x_ref[...], to_dtype)

    x = _normal((8, 128))
    r = rows // 8
    parts = x[..., None].view(np.uint16 if r == 2 else np.int8)	# (8, 128, r)
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((rows, 128), to_dtype))(x)
    y = y.view(np.uint16) if r == 2 else y	# a bf16 output: compared as its bits
    np.testing.assert_array_equal(y, parts.transpose(0, 2, 1).reshape(rows, 128))


def test_bitcast_to_bool_is_refused():
    def kernel(x_ref, y_ref):
        y_ref[...] = pltpu.bitcast(x_ref[...], jnp.bool_)

    with pytest.raises(pl.TraceError, match="bitcast of float32 to bool: bool has no bits"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.bool_))(
            _normal((8, 128)))


def test_take_along_axis_in_a_kernel_is_refused_by_name():
    """jnp.take_along_axis is the device's gather now (test_jax_ports4.py);
    a mode Pallas TPU's gathers do not have is named, never a wrong
    answer."""
    def kernel(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take_along_axis(x_ref[...], i_ref[...], axis=1, mode="clip")

    x = _normal((8, 128))
    idx = _rng.integers(0, 128, (8, 128)).astype(np.int32)
    with pytest.raises(pl.TraceError, match="jnp.take_along_axis.mode='clip'"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x, idx)


def test_can_read_semaphore():
    """tpu_pallas_test.py PallasCallDMATest.test_can_read_semaphore: a
    (2, 3) REGULAR array, each element signalled, read and waited."""
    m, n = 2, 3

    def kernel(y_ref):
        def body(sems):
            for r in range(m):
                for c in range(n):
                    v = r * n + c
                    pltpu.semaphore_signal(sems.at[r, c], v)
                    y_ref[r, c] = pltpu.semaphore_read(sems.at[r, c])
                    pltpu.semaphore_wait(sems.at[r, c], v)
        pl.run_scoped(body, pltpu.SemaphoreType.REGULAR((m, n)))

    y = pl.pallas_call(kernel, out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                       out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32))()
    np.testing.assert_array_equal(y, np.arange(m * n, dtype=np.int32).reshape(m, n))


def test_cannot_squeeze_lane_sublane():
    """tpu_pallas_test.py PallasCallDMATest.test_cannot_squeeze_lane_sublane:
    x_hbm_ref.at[:, :, 0] (the lane dimension squeezed) into rows of a
    VMEM ref is refused."""
    def kernel(x_hbm_ref, y_ref):
        def body(sem):
            dma1 = pltpu.async_copy(x_hbm_ref.at[:, :, 0], y_ref.at[pl.ds(0, 8)], sem)
            dma2 = pltpu.async_copy(x_hbm_ref.at[:, :, 1], y_ref.at[pl.ds(8, 8)], sem)
            dma1.wait()
            dma2.wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    x = np.arange(2 * 8 * 128.0, dtype=np.float32).reshape((2, 8, 128))
    with pytest.raises(Exception):
        pl.pallas_call(kernel, in_specs=[_ANY], out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                       out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)
