# SPDX-License-Identifier: MIT
"""Blocks indexed by element: pl.Element(n, padding=(low, high)) block
dimensions and older JAX's indexing_mode=pl.Unblocked(padding) /
pl.unblocked, whose index maps give element offsets. Ports of the grids
and BlockSpecs guide's unblocked examples (printed results), of
tpu_pallas_test's PallasCallUnblockedIndexingTest, and of the grouped
matmul's use (rows of a group from a scalar-prefetched offset)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def show_program_ids(x_shape, block_shape, grid, index_map, indexing_mode):
    def program_ids_kernel(o_ref):
        axes = 0
        for axis in range(len(grid)):
            axes += pl.program_id(axis) * 10**(len(grid) - 1 - axis)
        o_ref[...] = jnp.full(o_ref.shape, axes)
    return pl.pallas_call(
        program_ids_kernel,
        out_shape=jax.ShapeDtypeStruct(x_shape, dtype=np.int32),
        grid=grid, in_specs=[],
        out_specs=pl.BlockSpec(block_shape, index_map, indexing_mode=indexing_mode),
        interpret=True)()


def test_guide_unblocked_without_padding():
    out = show_program_ids((8, 6), (2, 3), (4, 2), lambda i, j: (2 * i, 3 * j),
                           pl.Unblocked())
    r, c = np.indices((8, 6))
    np.testing.assert_array_equal(out, (r // 2) * 10 + c // 3)


def test_guide_unblocked_with_low_padding():
    out = show_program_ids((7, 7), (2, 3), (4, 3), lambda i, j: (2 * i, 3 * j),
                           pl.Unblocked(((1, 0), (2, 0))))
    np.testing.assert_array_equal(out, [[0, 1, 1, 1, 2, 2, 2],
                                        [10, 11, 11, 11, 12, 12, 12],
                                        [10, 11, 11, 11, 12, 12, 12],
                                        [20, 21, 21, 21, 22, 22, 22],
                                        [20, 21, 21, 21, 22, 22, 22],
                                        [30, 31, 31, 31, 32, 32, 32],
                                        [30, 31, 31, 31, 32, 32, 32]])


def test_the_same_with_element_block_dimensions():
    out = show_program_ids((7, 7), (pl.Element(2, (1, 0)), pl.Element(3, (2, 0))), (4, 3),
                           lambda i, j: (2 * i, 3 * j), None)
    ref = show_program_ids((7, 7), (2, 3), (4, 3), lambda i, j: (2 * i, 3 * j),
                           pl.Unblocked(((1, 0), (2, 0))))
    np.testing.assert_array_equal(out, ref)


def test_unblocked_indexing():
    shape = (16 * 8, 128)
    result_ty = jax.ShapeDtypeStruct((15 * 8, 128), jnp.float32)

    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[pl.ds(0, 8)] + x_ref[pl.ds(8, 8)]

    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = pl.pallas_call(
        kernel, grid=(15,),
        in_specs=(pl.BlockSpec(lambda i: (i * 8, 0), (2 * 8, 128),
                               indexing_mode=pl.unblocked),),
        out_specs=pl.BlockSpec(lambda i: (i, 0), (8, 128)),
        out_shape=result_ty)(x)
    ref = np.concatenate([x[i * 8:(i + 1) * 8] + x[(i + 1) * 8:(i + 2) * 8]
                          for i in range(15)], axis=0)
    np.testing.assert_array_equal(y, ref)


def test_unblocked_indexing_with_padding():
    shape = (8, 128)

    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[pl.ds(0, 8)]

    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = pl.pallas_call(
        kernel, grid=(1,),
        in_specs=(pl.BlockSpec(lambda i: (0, 0), (2 * 8, 128),
                               indexing_mode=pl.Unblocked(((0, 8), (0, 0)))),),
        out_specs=pl.BlockSpec(lambda i: (0, 0), (8, 128)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_array_equal(y, x)


def test_group_rows_from_prefetched_offsets():
    """As the grouped matmul reads a group's rows: (pl.Element(bm), bk)
    blocks at offsets that need not be multiples of the block."""
    def kernel(starts_ref, x_ref, w_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    starts = np.array([0, 5, 13, 40, 56], np.int32)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    out = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(5,),
            in_specs=[pl.BlockSpec((pl.Element(8), 128), lambda i, s: (s[i], 0)),
                      pl.BlockSpec((128, 128), lambda i, s: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0))),
        out_shape=jax.ShapeDtypeStruct((40, 128), jnp.float32))(starts, x, w)
    ref = np.concatenate([x[s:s + 8].astype(np.float64) @ w for s in starts])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_an_element_output_writes_at_its_offsets():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(32, 128)
    out = pl.pallas_call(
        kernel, grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((pl.Element(8), 128), lambda i: (8 * (3 - i), 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)
    ref = np.concatenate([x[8 * (3 - i):8 * (4 - i)] + 1 for i in range(4)])
    np.testing.assert_array_equal(out, ref)


def test_element_blocks_in_emit_pipeline():
    def body(x_vmem, o_vmem):
        o_vmem[...] = x_vmem[...] * 2

    def kernel(x_hbm, o_hbm):
        pltpu.emit_pipeline(body, grid=(3,),
                            in_specs=[pl.BlockSpec((pl.Element(8), 128), lambda i: (4 * i, 0))],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    anyspec = pl.BlockSpec(memory_space=pltpu.ANY)
    out = pl.pallas_call(kernel, in_specs=[anyspec], out_specs=anyspec,
                         out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32))(x)
    np.testing.assert_array_equal(out, np.concatenate([2 * x[4 * i:4 * i + 8] for i in range(3)]))


def test_an_offset_past_the_array_fails_with_the_block():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    x = np.zeros((16, 128), np.float32)
    with pytest.raises(jax.TpurtError, match="block \\(16, 0\\) at step 2"):
        pl.pallas_call(kernel, grid=(3,),
                       in_specs=[pl.BlockSpec((pl.Element(8), 128), lambda i: (8 * i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                       out_shape=jax.ShapeDtypeStruct((24, 128), jnp.float32))(x)


def test_negative_padding_is_refused():
    with pytest.raises(ValueError, match="padding must be non-negative"):
        show_program_ids((8, 6), (pl.Element(2, (-1, 0)), 3), (4, 2),
                         lambda i, j: (i, j), None)


def test_element_block_wholly_in_a_pad_wider_than_the_block():
    """pl.Element padding of 256 before a 128-wide block: the first two
    blocks lie wholly in the padding and read zeros (the device once
    filled 256 leading pad elements into the 128 of the block's buffer)."""
    x = np.arange(8 * 256, dtype=np.float32).reshape(8, 256) + 1
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 512), jnp.float32), grid=(4,),
        in_specs=[pl.BlockSpec((8, pl.Element(128, (256, 0))), lambda i: (0, i * 128))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, i)))(x)
    want = np.concatenate([np.zeros((8, 256), np.float32), x], axis=1)
    np.testing.assert_array_equal(np.asarray(out), want)
