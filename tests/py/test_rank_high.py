# SPDX-License-Identifier: MIT
"""Arrays, blocks, scratch and values of rank 5 and 6, against NumPy. The
device holds 1 to 4 dimensions; the front end folds adjacent leading
dimensions where that is exact (python/tpuemu/_fold.py): an operand's
blocks (squeezed leading dimensions, whole ones, the last two blocked)
with their index maps combined, scratch, and the values a body makes
(element-wise ops with broadcasting, reductions, reshapes, transposes,
iotas, constant indexing, batched dots). An operand whose blocks do not
fold, and an operation on such values that is not folded, are refused
by name."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

F32 = np.float32


def _data(shape, seed=0):
    """Small integers as float32, so sums and products are exact."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-8, 8, shape)).astype(F32)


def _sds(shape):
    return jax.ShapeDtypeStruct(shape, F32)


def _add_one_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


# (shape, block, grid, index map): each folds differently
_ELEMENTWISE = {
    "squeezed-leading": ((2, 3, 4, 8, 128), (None, None, 2, 8, 128), (2, 3, 2),
                         lambda i, j, k: (i, j, k, 0, 0)),
    "squeezed-pl.Squeezed": ((2, 3, 4, 8, 128), (pl.Squeezed(), 1, 4, 8, 128), (2, 3),
                             lambda i, j: (i, j, 0, 0, 0)),
    "whole-leading": ((2, 3, 4, 8, 128), (1, 3, 4, 8, 128), (2,),
                      lambda i: (i, 0, 0, 0, 0)),
    "blocked-last-two": ((2, 2, 2, 16, 256), (None, 2, 2, 8, 128), (2, 2, 2),
                         lambda i, j, k: (i, 0, 0, j, k)),
    "rank6-squeezed": ((2, 2, 3, 2, 8, 128), (None, None, 3, 1, 8, 128), (2, 2, 2),
                       lambda i, j, k: (i, j, 0, k, 0, 0)),
    "rank6-whole": ((3, 2, 2, 2, 8, 128), (1, 2, 2, 2, 8, 128), (3,),
                    lambda i: (i, 0, 0, 0, 0, 0)),
    "rank6-inner-blocks": ((2, 4, 2, 3, 8, 128), (1, 2, None, 3, 8, 128), (2, 2, 2),
                           lambda i, j, k: (i, j, k, 0, 0, 0)),
}


@pytest.mark.parametrize("case", list(_ELEMENTWISE))
def test_elementwise_grid(case):
    shape, block, grid, imap = _ELEMENTWISE[case]
    x = _data(shape)
    spec = pl.BlockSpec(block, imap)
    out = pl.pallas_call(_add_one_kernel, out_shape=_sds(shape), grid=grid,
                         in_specs=[spec], out_specs=spec)(x)
    np.testing.assert_array_equal(out, x * 2 + 1)


def test_scalar_prefetch_index_map():
    """A folded index map reading scalar prefetch: blocks picked by a table,
    i * 3 + s[j] on the device."""
    x = _data((2, 3, 4, 8, 128))
    table = np.array([2, 0, 1], np.int32)

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    gs = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2, 3),
        in_specs=[pl.BlockSpec((None, None, 4, 8, 128),
                               lambda i, j, s: (i, s[j], 0, 0, 0))],
        out_specs=pl.BlockSpec((None, None, 4, 8, 128), lambda i, j, s: (i, j, 0, 0, 0)))
    out = pl.pallas_call(kernel, out_shape=_sds(x.shape), grid_spec=gs)(table, x)
    np.testing.assert_array_equal(out, x[:, table] + 1)


def test_broadcast_and_block_shapes_seen():
    """The kernel sees the user's block shapes; operands of rank 5 and
    lower broadcast as NumPy's."""
    x = _data((2, 3, 4, 8, 128))
    b = _data((1, 3, 1, 1, 128), 1)
    c = _data((8, 128), 2)
    seen = []

    def kernel(x_ref, b_ref, c_ref, o_ref):
        seen.append((x_ref.shape, b_ref.shape, o_ref.shape))
        v = x_ref[...]
        seen.append(v.shape)
        o_ref[...] = jnp.maximum(v + b_ref[...], 0.0) * c_ref[...] - b_ref[...]

    out = pl.pallas_call(
        kernel, out_shape=_sds(x.shape), grid=(2,),
        in_specs=[pl.BlockSpec((None, 3, 4, 8, 128), lambda i: (i, 0, 0, 0, 0)),
                  pl.BlockSpec((1, 3, 1, 1, 128), lambda i: (0, 0, 0, 0, 0)),
                  pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((1, 3, 4, 8, 128), lambda i: (i, 0, 0, 0, 0)))(x, b, c)
    np.testing.assert_array_equal(out, np.maximum(x + b, 0) * c - b)
    assert seen[0] == ((3, 4, 8, 128), (1, 3, 1, 1, 128), (1, 3, 4, 8, 128))
    assert seen[1] == (3, 4, 8, 128)


@pytest.mark.parametrize("axis,keepdims", [(0, False), (1, False), (2, True), (3, False),
                                           (4, True), ((0, 2), False), (None, True)])
def test_reduce_rank5(axis, keepdims):
    x = _data((2, 3, 4, 8, 128))
    want = x.sum(axis=axis, keepdims=keepdims)
    want = want.reshape(1, 1) if want.ndim == 0 else want

    def kernel(x_ref, o_ref):
        r = jnp.sum(x_ref[...], axis=axis, keepdims=keepdims)
        o_ref[...] = r.reshape(o_ref.shape) if axis is None and not keepdims else r

    out = pl.pallas_call(kernel, out_shape=_sds(want.shape))(x)
    np.testing.assert_array_equal(out, want)


def test_reduce_max_rank6_leading_axis():
    x = _data((2, 2, 3, 2, 8, 128))

    def kernel(x_ref, o_ref, a_ref):
        o_ref[...] = jnp.max(x_ref[...], axis=2)
        a_ref[...] = x_ref[...].mean(axis=0, keepdims=True)

    o, a = pl.pallas_call(kernel, out_shape=(_sds((2, 2, 2, 8, 128)),
                                             _sds((1, 2, 3, 2, 8, 128))))(x)
    np.testing.assert_array_equal(o, x.max(axis=2))
    np.testing.assert_allclose(a, x.mean(axis=0, keepdims=True), rtol=1e-6)


def test_dot_general_two_batch_dims():
    """lax.dot_general with batch dimensions (0, 1) and two free dimensions
    of the lhs: a result of rank 5, over a grid of the first batch dim."""
    x = _data((2, 3, 4, 8, 128))
    y = _data((2, 3, 128, 128), 1)
    dims = (((4,), (2,)), ((0, 1), (0, 1)))

    def kernel(x_ref, y_ref, o_ref, e_ref):
        o_ref[...] = jax.lax.dot_general(x_ref[...], y_ref[...], dims,
                                         preferred_element_type=jnp.float32)
        e_ref[...] = jnp.einsum("abmnk,abkp->bamnp", x_ref[...], y_ref[...])

    o, e = pl.pallas_call(
        kernel, out_shape=(_sds((2, 3, 4, 8, 128)), _sds((3, 2, 4, 8, 128))), grid=(1,),
        in_specs=[pl.BlockSpec((2, 3, 4, 8, 128), lambda i: (0, 0, 0, 0, 0)),
                  pl.BlockSpec((2, 3, 128, 128), lambda i: (0, 0, 0, 0))],
        out_specs=[pl.BlockSpec((2, 3, 4, 8, 128), lambda i: (0, 0, 0, 0, 0)),
                   pl.BlockSpec((3, 2, 4, 8, 128), lambda i: (0, 0, 0, 0, 0))])(x, y)
    want = np.einsum("abmnk,abkp->abmnp", x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(e, want.transpose(1, 0, 2, 3, 4))


def test_scratch_rank5_accumulates():
    """A rank-5 VMEM scratch accumulating a rank-6 input's blocks along an
    arbitrary grid dimension; a traced index into its leading dimension."""
    x = _data((3, 2, 3, 4, 8, 128))

    def kernel(x_ref, o_ref, acc_ref):
        k = pl.program_id(0)

        @pl.when(k == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        acc_ref[...] += x_ref[...]
        acc_ref[1] = acc_ref[1] + x_ref[0] * 0.0 + 1.0

        @pl.when(k == pl.num_programs(0) - 1)
        def _():
            o_ref[...] = acc_ref[...]

    out = pl.pallas_call(
        kernel, out_shape=_sds((2, 3, 4, 8, 128)), grid=(3,),
        in_specs=[pl.BlockSpec((None, 2, 3, 4, 8, 128), lambda k: (k, 0, 0, 0, 0, 0))],
        out_specs=pl.BlockSpec((2, 3, 4, 8, 128), lambda k: (0, 0, 0, 0, 0)),
        scratch_shapes=[pltpu.VMEM((2, 3, 4, 8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x)
    want = x.sum(axis=0)
    want[1] += 3
    np.testing.assert_array_equal(out, want)


def test_hbm_rank5_copies():
    """A pl.ANY operand of rank 5 copied whole and by a window of its
    leading dimension into rank-5 VMEM scratch."""
    x = np.arange(2 * 3 * 4 * 8 * 128, dtype=F32).reshape(2, 3, 4, 8, 128)

    def kernel(x_hbm, o_ref, buf, sem):
        pltpu.sync_copy(x_hbm, buf)
        o_ref[...] = buf[...] + 1
        c = pltpu.make_async_copy(x_hbm.at[1], buf.at[0], sem)
        c.start()
        c.wait()
        o_ref[0] = buf[0] * 2

    out = pl.pallas_call(kernel, out_shape=_sds(x.shape),
                         in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                         scratch_shapes=[pltpu.VMEM(x.shape, jnp.float32),
                                         pltpu.SemaphoreType.DMA])(x)
    want = x + 1
    want[0] = x[1] * 2
    np.testing.assert_array_equal(out, want)


def test_aliased_whole_vmem_rank5():
    """An input aliased to an output, both whole rank-5 VMEM blocks: one
    buffer, as in Mosaic; a value read before a store keeps what it read."""
    x = _data((2, 3, 4, 8, 128))

    def kernel(x_ref, o_ref):
        before = o_ref[...]
        o_ref[...] = before + 1
        o_ref[...] = x_ref[...] * 2 + before

    spec = pl.BlockSpec(memory_space=pltpu.VMEM)
    out = pl.pallas_call(kernel, out_shape=_sds(x.shape), in_specs=[spec], out_specs=spec,
                         input_output_aliases={0: 0})(x)
    np.testing.assert_array_equal(out, (x + 1) * 2 + x)


def test_smem_rank5_elements():
    """Elements of rank-5 SMEM blocks and scratch, at static and traced
    indices, read and stored one at a time."""
    s = np.arange(2 * 3 * 2 * 2 * 2, dtype=np.int32).reshape(2, 3, 2, 2, 2)
    x = np.zeros((2, 8, 128), F32)

    def kernel(s_ref, x_ref, o_ref, t_ref):
        i = pl.program_id(0)
        t_ref[i, 2, 0, 1, 1] = s_ref[1, 2, 1, i, 1] * 2
        o_ref[...] = x_ref[...] + (t_ref[i, 2, 0, 1, 1] + s_ref[i, 1, 1, 1, 0]).astype(
            jnp.float32)

    out = pl.pallas_call(
        kernel, out_shape=_sds(x.shape), grid=(2,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0)),
        scratch_shapes=[pltpu.SMEM((2, 3, 2, 2, 2), jnp.int32)])(s, x)
    for i in range(2):
        np.testing.assert_array_equal(out[i], s[1, 2, 1, i, 1] * 2 + s[i, 1, 1, 1, 0])


def test_run_scoped_rank6():
    """pl.run_scoped scratch of rank 6, stored and read whole and by a
    leading index."""
    x = _data((2, 2, 3, 2, 8, 128))

    def kernel(x_ref, o_ref):
        def body(t_ref):
            t_ref[...] = x_ref[...] * 3.0
            t_ref[1] = t_ref[0] + t_ref[1]
            o_ref[...] = t_ref[...]
        pl.run_scoped(body, pltpu.VMEM(x.shape, jnp.float32))

    out = pl.pallas_call(kernel, out_shape=_sds(x.shape))(x)
    want = x * 3
    want[1] += want[0]
    np.testing.assert_array_equal(out, want)


def test_traced_index_of_leading_dims():
    """x_ref[i, j] and o_ref[i, j] = ... at program ids, of folded refs."""
    x = _data((2, 3, 4, 8, 128))

    def kernel(x_ref, o_ref):
        i, j = pl.program_id(0), pl.program_id(1)
        o_ref[i, j] = x_ref[i, j] + (i * 10 + j).astype(jnp.float32)

    out = pl.pallas_call(
        kernel, out_shape=_sds(x.shape), grid=(2, 3),
        in_specs=[pl.BlockSpec(x.shape, lambda i, j: (0, 0, 0, 0, 0))],
        out_specs=pl.BlockSpec(x.shape, lambda i, j: (0, 0, 0, 0, 0)),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("arbitrary", "arbitrary")))(x)
    want = x + (np.arange(2)[:, None] * 10 + np.arange(3)[None, :])[:, :, None, None, None]
    np.testing.assert_array_equal(out, want)


def test_reshape_transpose_iota():
    x = _data((2, 3, 4, 8, 128))

    def kernel(x_ref, t_ref, s_ref, r_ref, i_ref):
        v = x_ref[...]
        t_ref[...] = jnp.transpose(v, (1, 0, 2, 3, 4))
        s_ref[...] = jnp.swapaxes(v, 2, 3)
        r_ref[...] = v.reshape(6, 4, 8, 128).reshape(2, 3, 4, 1, 8, 128) + 1.0
        i_ref[...] = jax.lax.broadcasted_iota(jnp.int32, (2, 3, 4, 8, 128), 1)

    t, s, r, io = pl.pallas_call(
        kernel, out_shape=(_sds((3, 2, 4, 8, 128)), _sds((2, 3, 8, 4, 128)),
                           _sds((2, 3, 4, 1, 8, 128)),
                           jax.ShapeDtypeStruct((2, 3, 4, 8, 128), jnp.int32)))(x)
    np.testing.assert_array_equal(t, x.transpose(1, 0, 2, 3, 4))
    np.testing.assert_array_equal(s, x.swapaxes(2, 3))
    np.testing.assert_array_equal(r, x.reshape(2, 3, 4, 1, 8, 128) + 1)
    np.testing.assert_array_equal(io, np.broadcast_to(np.arange(3)[None, :, None, None, None],
                                                      io.shape))


@pytest.mark.parametrize("shape,perm", [((2, 2, 2, 2, 8), None),
                                        ((2, 2, 2, 2, 2, 8), (5, 3, 1, 4, 0, 2)),
                                        ((2, 3, 2, 4, 8, 128), (0, 1, 2, 3, 5, 4))])
def test_transpose_many_groups(shape, perm):
    """Permutations whose moved dimensions make more than 4 groups (x.T):
    one dimension moved at a time, each move a device transpose (small
    shapes: libtpurt refuses by name transposes that take too many ops)."""
    x = _data(shape)
    want = np.transpose(x, perm)

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = v.T if perm is None else jnp.transpose(v, perm)

    out = pl.pallas_call(kernel, out_shape=_sds(want.shape))(x)
    np.testing.assert_array_equal(out, want)


def test_value_indexing():
    """Constant ints and slices of rank-5 values, the results of rank 5,
    4 and 3."""
    x = _data((2, 3, 4, 8, 128))

    def kernel(x_ref, a_ref, b_ref, c_ref):
        v = x_ref[...] + 1.0
        a_ref[...] = v[:, 1:3]
        b_ref[...] = v[1]
        c_ref[...] = v[0, 2, :, 0:8, 0:128] * 2.0

    a, b, c = pl.pallas_call(kernel, out_shape=(_sds((2, 2, 4, 8, 128)), _sds((3, 4, 8, 128)),
                                                _sds((4, 8, 128))))(x)
    np.testing.assert_array_equal(a, (x + 1)[:, 1:3])
    np.testing.assert_array_equal(b, (x + 1)[1])
    np.testing.assert_array_equal(c, (x + 1)[0, 2] * 2)


def test_block_that_does_not_fold():
    """Blocks of 2 of dims of 4 in every leading dimension: no two merge
    exactly; the error names the operand and the dimensions."""
    x = _data((4, 4, 4, 8, 128))
    spec = pl.BlockSpec((2, 2, 2, 8, 128), lambda i, j, k: (i, j, k, 0, 0))
    with pytest.raises(ValueError, match=r"args\[0\].*rank 5.*dims \[0\].*and \[1\]"):
        pl.pallas_call(_add_one_kernel, out_shape=_sds(x.shape), grid=(2, 2, 2),
                       in_specs=[spec], out_specs=spec)(x)


def test_rank7_refused():
    x = np.zeros((1, 1, 1, 1, 1, 8, 128), F32)
    with pytest.raises(ValueError, match=r"rank 7.*1 to 6"):
        pl.pallas_call(_add_one_kernel, out_shape=_sds(x.shape))(x)


def test_value_op_not_folded():
    """An operation on a rank-5 value that is not folded (concatenate) is
    refused by name, not run on the device's view."""
    x = _data((2, 3, 4, 8, 128))

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.concatenate([x_ref[...], x_ref[...]], axis=0)

    with pytest.raises(pl.TraceError, match=r"concatenate.*rank 5"):
        pl.pallas_call(kernel, out_shape=_sds((4, 3, 4, 8, 128)))(x)
