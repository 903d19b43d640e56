# SPDX-License-Identifier: MIT
"""Copies of a traced pl.ds size, pl.select_ref with a traced index,
pltpu.roll with a stride and windows of reshaped refs, against NumPy: other
shapes, dtypes and sizes than the ports of JAX's tests, and the refusals."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

F32 = jnp.float32
ANY = pl.BlockSpec(memory_space=pl.ANY)
SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


def _arange(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# --- pl.ds(start, size) with a traced size, in copies ---

def _rows_copy(x, o, start, size, dst_start):
    """o with o[dst_start:dst_start + size] = x[start:start + size], by an
    async copy between HBM refs of a size read from SMEM."""
    def kernel(s_ref, x_hbm, o_in, o_hbm, sem):
        n = s_ref[1]
        pltpu.async_copy(x_hbm.at[pl.ds(s_ref[0], n)], o_hbm.at[pl.ds(s_ref[2], n)],
                         sem).wait()

    return pl.pallas_call(
        kernel,
        in_specs=[SMEM, ANY, ANY], out_specs=ANY,
        scratch_shapes=[pltpu.SemaphoreType.DMA],
        out_shape=jax.ShapeDtypeStruct(o.shape, o.dtype),
        input_output_aliases={2: 0})(np.array([start, size, dst_start], np.int32), x, o)


@pytest.mark.parametrize("size", [0, 1, 7, 8, 13, 16, 24])
def test_traced_size_rows(size):
    """Chunks of 8 rows, then the rest one by one: every size lands exactly
    (nothing past it is written)."""
    x = _arange((32, 128))
    o = np.full((40, 128), -1, np.float32)
    out = _rows_copy(x, o, 5, size, 11)
    expected = o.copy()
    expected[11:11 + size] = x[5:5 + size]
    np.testing.assert_array_equal(out, expected)


def test_traced_size_short_ref_3d_int32():
    """A ref of fewer than 8 rows is copied one row (slab) at a time."""
    x = _arange((6, 8, 128), np.int32)
    o = np.zeros((6, 8, 128), np.int32)
    for size in (0, 3, 6):
        out = _rows_copy(x, o, 0, size, 0)
        expected = o.copy()
        expected[:size] = x[:size]
        np.testing.assert_array_equal(out, expected)


def test_traced_size_columns_into_vmem_bf16():
    """sync_copy of a traced number of columns into VMEM scratch, bf16."""
    def kernel(s_ref, x_hbm, o_ref, buf):
        buf[...] = jnp.zeros_like(buf)
        pltpu.sync_copy(x_hbm.at[:, pl.ds(s_ref[0], s_ref[1])],
                        buf.at[:, pl.ds(0, s_ref[1])])
        o_ref[...] = buf[...]

    x = jax.to_bf16(_arange((16, 384)) / 8)
    for start, size in ((3, 0), (128, 100), (7, 257)):
        out = pl.pallas_call(
            kernel, in_specs=[SMEM, ANY],
            scratch_shapes=[pltpu.VMEM((16, 384), jnp.bfloat16)],
            out_shape=jax.ShapeDtypeStruct((16, 384), jnp.bfloat16))(
                np.array([start, size], np.int32), x)
        expected = np.zeros_like(x)
        expected[:, :size] = x[:, start:start + size]
        np.testing.assert_array_equal(out.view(np.uint16), expected)


def test_traced_size_under_when_and_descriptor():
    """A descriptor made once, started and waited under pl.when: the copy
    runs only where the condition holds."""
    def kernel(s_ref, x_hbm, o_in, o_hbm, sem):
        cp = pltpu.make_async_copy(x_hbm.at[pl.ds(0, s_ref[0])],
                                   o_hbm.at[pl.ds(0, s_ref[0])], sem)

        @pl.when(s_ref[1] == 1)
        def _():
            cp.start()
            cp.wait()

    x = _arange((24, 128), np.int32)
    o = np.zeros((24, 128), np.int32)
    for size, go in ((19, 1), (19, 0)):
        out = pl.pallas_call(
            kernel, in_specs=[SMEM, ANY, ANY], out_specs=ANY,
            scratch_shapes=[pltpu.SemaphoreType.DMA],
            out_shape=jax.ShapeDtypeStruct(o.shape, o.dtype),
            input_output_aliases={2: 0})(np.array([size, go], np.int32), x, o)
        expected = o.copy()
        if go:
            expected[:size] = x[:size]
        np.testing.assert_array_equal(out, expected)


def test_traced_size_in_a_device_loop():
    """A size per block, read in a device loop over the blocks: the chunk
    loops nest inside it."""
    def kernel(s_ref, x_hbm, o_in, o_hbm, sem):
        def body(b, c):
            n = s_ref[1 + b]
            pltpu.async_copy(x_hbm.at[pl.ds(b * 16, n)], o_hbm.at[pl.ds(b * 16, n)],
                             sem).wait()
            return c
        lax.fori_loop(0, s_ref[0], body, 0)

    sizes = [3, 16, 0, 9]
    x = _arange((64, 128))
    o = np.full((64, 128), -1, np.float32)
    y = pl.pallas_call(
        kernel, in_specs=[SMEM, ANY, ANY], out_specs=ANY,
        scratch_shapes=[pltpu.SemaphoreType.DMA],
        out_shape=jax.ShapeDtypeStruct(o.shape, o.dtype),
        input_output_aliases={2: 0})(np.array([4] + sizes, np.int32), x, o)
    want = o.copy()
    for b, n in enumerate(sizes):
        want[b * 16:b * 16 + n] = x[b * 16:b * 16 + n]
    np.testing.assert_array_equal(y, want)


def test_traced_size_refusals():
    """Reads, stores and mismatched copies of a traced size are refused
    by name."""
    def read(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, s_ref[0])]

    def window_read(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref.at[pl.ds(0, s_ref[0])][...]

    def one_sided(s_ref, x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.at[pl.ds(0, s_ref[0])], o_hbm.at[pl.ds(0, 8)])

    def two_sizes(s_ref, x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.at[pl.ds(0, s_ref[0])], o_hbm.at[pl.ds(0, s_ref[1])])

    def strided(s_ref, x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.at[pl.ds(0, s_ref[0], 2)], o_hbm.at[pl.ds(0, s_ref[0], 2)])

    s = np.array([4, 4], np.int32)
    x = _arange((8, 128))
    for k, specs, match in ((read, [SMEM, None], "only copies"),
                            (window_read, [SMEM, None], "a read of x_ref"),
                            (one_sided, [SMEM, ANY], "static shape"),
                            (two_sizes, [SMEM, ANY], "the same value"),
                            (strided, [SMEM, ANY], "stride 1")):
        with pytest.raises(pl.TraceError, match=match):
            pl.pallas_call(k, in_specs=specs,
                           out_specs=ANY if specs[1] is not None else None,
                           out_shape=jax.ShapeDtypeStruct((8, 128), F32))(s, x)


# --- pl.select_ref with a traced index ---

def test_select_ref_three_sources_clamped():
    """The source of a copy picked among three, the index clamped into
    range as lax.switch's."""
    def kernel(i_ref, a, b, c, o, sem):
        pltpu.async_copy(pl.select_ref(i_ref[0], a, b, c), o, sem).wait()

    xs = [_arange((8, 128)) + 1000 * k for k in range(3)]
    for i in (-3, 0, 1, 2, 7):
        out = pl.pallas_call(
            kernel, in_specs=[SMEM, ANY, ANY, ANY], out_specs=ANY,
            scratch_shapes=[pltpu.SemaphoreType.DMA],
            out_shape=jax.ShapeDtypeStruct((8, 128), F32))(np.array([i], np.int32), *xs)
        np.testing.assert_array_equal(out, xs[min(max(i, 0), 2)])


def test_select_ref_destination_window_and_semaphore():
    """The destination (a window of one of two outputs) and the semaphore
    picked by SMEM values: only the chosen output is written."""
    def kernel(i_ref, x, o0, o1, sems):
        dst = pl.select_ref(i_ref[0], o0, o1).at[pl.ds(8, 8)]
        sem = pl.select_ref(i_ref[1], sems.at[0], sems.at[1])
        o0[...] = jnp.zeros_like(o0)
        o1[...] = jnp.zeros_like(o1)
        pltpu.make_async_copy(x, dst, sem).start()
        pltpu.make_async_copy(x, dst, sem).wait()

    x = _arange((8, 128), np.int32) + 1
    for i, j in ((0, 1), (1, 0), (1, 1)):
        y0, y1 = pl.pallas_call(
            kernel, in_specs=[SMEM, pl.BlockSpec(memory_space=pltpu.VMEM)],
            scratch_shapes=[pltpu.SemaphoreType.DMA((2,))],
            out_shape=(jax.ShapeDtypeStruct((16, 128), jnp.int32),
                       jax.ShapeDtypeStruct((16, 128), jnp.int32)))(
                np.array([i, j], np.int32), x)
        want = np.zeros((16, 128), np.int32)
        want[8:] = x
        np.testing.assert_array_equal(y0, want if i == 0 else 0)
        np.testing.assert_array_equal(y1, want if i == 1 else 0)


def test_select_ref_in_a_device_loop():
    """The source alternating with the trip of a 40-trip device loop."""
    def kernel(x_hbm, a_hbm, o_hbm, sem):
        def body(b, c):
            src = pl.select_ref(b % 2, x_hbm, a_hbm).at[pl.ds(b * 8, 8)]
            pltpu.async_copy(src, o_hbm.at[pl.ds(b * 8, 8)], sem).wait()
            return c
        lax.fori_loop(0, 40, body, 0)

    x = _arange((320, 128))
    a = -x - 1
    y = pl.pallas_call(kernel, in_specs=[ANY, ANY], out_specs=ANY,
                       scratch_shapes=[pltpu.SemaphoreType.DMA],
                       out_shape=jax.ShapeDtypeStruct(x.shape, F32))(x, a)
    want = np.concatenate([(x if b % 2 == 0 else a)[b * 8:b * 8 + 8] for b in range(40)])
    np.testing.assert_array_equal(y, want)


def test_select_ref_read_and_store():
    """A read of a selected ref is the chosen one's value; a store writes
    the chosen one only."""
    def kernel(i_ref, a_ref, b_ref, o_ref, p_ref, q_ref):
        p_ref[...] = jnp.zeros_like(p_ref)
        q_ref[...] = jnp.zeros_like(q_ref)
        o_ref[...] = pl.select_ref(i_ref[0], a_ref, b_ref)[...] * 2
        pl.select_ref(i_ref[0], p_ref, q_ref)[0:8] = a_ref[0:8] + 1

    a = _arange((16, 128))
    b = -_arange((16, 128))
    for i in (0, 1):
        o, p, q = pl.pallas_call(
            kernel, in_specs=[SMEM, None, None],
            out_shape=(jax.ShapeDtypeStruct((16, 128), F32),) * 3)(
                np.array([i], np.int32), a, b)
        np.testing.assert_array_equal(o, (a if i == 0 else b) * 2)
        want = np.zeros((16, 128), np.float32)
        want[:8] = a[:8] + 1
        np.testing.assert_array_equal(p, want if i == 0 else 0)
        np.testing.assert_array_equal(q, want if i == 1 else 0)


def test_select_ref_refusals():
    def shapes(i_ref, a, b, o):
        o[...] = pl.select_ref(i_ref[0], a, b)[...]

    def array_index(i_ref, a, b, o):
        o[...] = pl.select_ref(i_ref, a, b)[...]

    a = _arange((8, 128))
    with pytest.raises(pl.TraceError, match="one shape and dtype"):
        pl.pallas_call(shapes, in_specs=[SMEM, None, None],
                       out_shape=jax.ShapeDtypeStruct((8, 128), F32))(
            np.array([0], np.int32), a, _arange((16, 128)))
    with pytest.raises(pl.TraceError, match="must be a scalar"):
        pl.pallas_call(array_index, in_specs=[SMEM, None, None],
                       out_shape=jax.ShapeDtypeStruct((8, 128), F32))(
            np.array([0], np.int32), a, a)


# --- pltpu.roll with stride and stride_axis ---

def _strided_roll_ref(x, shift, axis, stride, stride_axis):
    out = np.empty_like(x)
    for i in range(x.shape[stride_axis]):
        sl = [slice(None)] * x.ndim
        sl[stride_axis] = i
        out[tuple(sl)] = np.roll(x[tuple(sl)], shift + i * stride, axis - (axis > stride_axis))
    return out


@pytest.mark.parametrize("shape,shift,axis,stride,stride_axis,dtype", [
    ((16, 128), 5, 0, 3, 1, np.float32),	# columns rolled along the rows
    ((8, 256), 0, 1, 37, 0, np.int32),
    ((24, 128), 127, 1, 200, 0, np.float32),	# stride past the axis length
    ((16, 128), 2, 0, 16, 1, np.int32),		# every extra shift 0 mod 16
    ((2, 8, 128), 1, 2, 5, 1, np.float32),	# rank 3
])
def test_roll_strided_cases(shape, shift, axis, stride, stride_axis, dtype):
    x = _arange(shape, dtype)

    def kernel(x_ref, y_ref):
        y_ref[...] = pltpu.roll(x_ref[...], shift, axis, stride=stride,
                                stride_axis=stride_axis)

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype))(x)
    np.testing.assert_array_equal(y, _strided_roll_ref(x, shift, axis, stride, stride_axis))


def test_roll_strided_traced_shift():
    def kernel(s_ref, x_ref, y_ref):
        y_ref[...] = pltpu.roll(x_ref[...], s_ref[0], 1, stride=3, stride_axis=0)

    x = _arange((8, 512), np.int32)
    y = pl.pallas_call(kernel, in_specs=[SMEM, None],
                       out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32))(
        np.array([77], np.int32), x)
    np.testing.assert_array_equal(y, _strided_roll_ref(x, 77, 1, 3, 0))


def test_roll_strided_refusals():
    x = _arange((8, 128))
    for kw, match in (({"stride": 1, "stride_axis": 1}, "must differ"),
                      ({"stride": 1}, "go together"),
                      ({"stride": -1, "stride_axis": 0}, "non-negative"),
                      ({"stride": 1, "stride_axis": 2}, "stride_axis 2")):
        def kernel(x_ref, y_ref):
            y_ref[...] = pltpu.roll(x_ref[...], 1, 1, **kw)
        with pytest.raises(pl.TraceError, match=match):
            pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)


# --- windows of reshaped refs ---

def test_reshaped_window_copies():
    """x.reshape(...).at[...] and x.at[...].reshape(...) in copies: HBM
    to VMEM and back, dimensions of 1 dropped and indexed."""
    def kernel(x_hbm, o_hbm, buf):
        pltpu.sync_copy(x_hbm.reshape(12, 256).at[pl.ds(2, 4), 128:], buf)
        pltpu.sync_copy(buf, o_hbm.at[1:5, :, :].reshape(4, 128))

    x = _arange((12, 1, 256), np.int32)
    o = pl.pallas_call(kernel, in_specs=[ANY], out_specs=ANY,
                       scratch_shapes=[pltpu.VMEM((4, 128), jnp.int32)],
                       out_shape=jax.ShapeDtypeStruct((6, 1, 128), jnp.int32))(x)
    np.testing.assert_array_equal(o[1:5, 0], x[2:6, 0, 128:])


def test_reshaped_window_reads_and_stores():
    """In VMEM: windows of a reshape read and store the base's window;
    one of rows the reshape splits or merges reads and stores it
    reshaped."""
    def kernel(x_ref, w_ref, y_ref, z_ref, m_ref):
        y_ref[...] = jnp.zeros_like(y_ref)
        y_ref.reshape(4, 2, 128).at[1:3, :, :].reshape(4, 128)[...] = \
            x_ref.reshape(8, 128)[4:8] + 1
        z_ref[...] = x_ref.at[0:4].reshape(4, 128)[1:3]
        m_ref[...] = w_ref.reshape(4, 256)[1:3]

    x = _arange((8, 1, 128))
    w = _arange((8, 128)) * 3
    y, z, m = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), F32),
                                                jax.ShapeDtypeStruct((2, 128), F32),
                                                jax.ShapeDtypeStruct((2, 256), F32)))(x, w)
    want = np.zeros((8, 128), np.float32)
    want[2:6] = x[4:8, 0] + 1
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z, x[1:3, 0])
    np.testing.assert_array_equal(m, w.reshape(4, 256)[1:3])


def test_reshaped_window_refusals():
    def merged(x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.reshape(4, 256), o_hbm)

    def cut(x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.reshape(16, 64).at[1:2], o_hbm.at[0:1, 0:64])

    def kept_unit(x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.reshape(8, 1, 128), o_hbm.reshape(8, 1, 128))

    x = _arange((8, 128))
    for k, match in ((merged, "merges, splits or adds"), (cut, "merges, splits or adds"),
                     (kept_unit, "merges, splits or adds")):
        with pytest.raises(pl.TraceError, match=match):
            pl.pallas_call(k, in_specs=[ANY], out_specs=ANY,
                           out_shape=jax.ShapeDtypeStruct((8, 128), F32))(x)


def test_copies_through_a_reshape_merging_leading_dimensions():
    """ref.reshape(n * m, ...) of an (n, m, ...) ref as a copy's source or
    destination: one piece per leading index, rows of the other operand
    (a window of it too), waited on piece by piece on one semaphore."""
    def kernel(x_hbm, o_hbm, p_hbm):
        def body(sem, buf, buf2, buf4):
            pltpu.async_copy(x_hbm.reshape(24, 128), buf.at[8:32], sem).wait()
            pltpu.async_copy(buf.at[8:32], o_hbm.reshape(24, 128), sem).wait()
            pltpu.sync_copy(x_hbm.reshape(24, 128).at[0:16], buf2)
            pltpu.sync_copy(buf2, buf4.reshape(16, 128))	# three dimensions merged
            pltpu.sync_copy(buf4.reshape(16, 128), p_hbm)
        pl.run_scoped(body, pltpu.SemaphoreType.DMA, pltpu.VMEM((40, 128), F32),
                      pltpu.VMEM((16, 128), F32), pltpu.VMEM((2, 2, 4, 128), F32))

    x = _arange((3, 8, 128))
    o, p = pl.pallas_call(kernel, in_specs=[ANY], out_specs=(ANY, ANY),
                          out_shape=(jax.ShapeDtypeStruct((3, 8, 128), F32),
                                     jax.ShapeDtypeStruct((16, 128), F32)))(x)
    np.testing.assert_array_equal(o, x)
    np.testing.assert_array_equal(p, x.reshape(24, 128)[:16])


def test_merging_reshape_copy_refusals():
    def both(x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm.reshape(24, 128), o_hbm.reshape(24, 128))

    def many(x_hbm, o_hbm):
        def body(buf):
            pltpu.sync_copy(buf.reshape(512, 128), o_hbm)
        pl.run_scoped(body, pltpu.VMEM((512, 1, 128), F32))

    for k, shape, match in ((both, (3, 8, 128), "both .* merge their bases"),
                            (many, (512, 128), "merges 512 windows .* at most 256")):
        with pytest.raises(pl.TraceError, match=match):
            pl.pallas_call(k, in_specs=[ANY], out_specs=ANY,
                           out_shape=jax.ShapeDtypeStruct(shape, F32))(_arange(shape))
