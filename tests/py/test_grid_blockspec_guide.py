# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""The grids and BlockSpecs guide (docs/pallas/grid_blockspec.md) as written
there: show_program_ids over blocks that divide the array, that overhang it
(edge blocks write only in bounds), a block larger than the array, a 3-D
grid revisiting each output block (the last visit's value stays), default
block shapes and index maps, and a squeezed (None) block dimension. The
guide runs them with interpret=True, which takes block shapes off Pallas
TPU's (8, 128) tiling; without it the device refuses them, as Mosaic does."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl


def show_program_ids(x_shape, block_shape, grid, index_map=lambda i, j: (i, j),
                     interpret=True):
    def program_ids_kernel(o_ref):  # Fill the output block with 10*program_id(1) + program_id(0)
        axes = 0
        for axis in range(len(grid)):
            axes += pl.program_id(axis) * 10**(len(grid) - 1 - axis)
        o_ref[...] = jnp.full(o_ref.shape, axes)
    return pl.pallas_call(program_ids_kernel,
                          out_shape=jax.ShapeDtypeStruct(x_shape, dtype=np.int32),
                          grid=grid,
                          in_specs=[],
                          out_specs=pl.BlockSpec(block_shape, index_map),
                          interpret=interpret)()


def _expected(rows, cols, block, grid_digits):
    """Each element's block's program ids as the guide prints them."""
    r, c = np.indices((rows, cols))
    return (r // block[0]) * 10 ** (grid_digits - 1) + (c // block[1]) * 10 ** (grid_digits - 2)


def test_blocks_that_divide_the_array():
    np.testing.assert_array_equal(show_program_ids((8, 6), (2, 3), (4, 2)),
                                  _expected(8, 6, (2, 3), 2))


def test_blocks_out_of_bounds_write_only_in_bounds():
    np.testing.assert_array_equal(show_program_ids((7, 5), (2, 3), (4, 2)),
                                  _expected(7, 5, (2, 3), 2))


def test_an_array_smaller_than_its_block():
    np.testing.assert_array_equal(show_program_ids((1, 2), (2, 3), (1, 1)), [[0, 0]])


def test_revisits_keep_the_last_program():
    out = show_program_ids((8, 6), (2, 3), (4, 2, 10), index_map=lambda i, j, k: (i, j))
    np.testing.assert_array_equal(out, _expected(8, 6, (2, 3), 3) + 9)


@pytest.mark.parametrize("block_shape", [None, (4, 4)])
def test_default_block_shape_and_index_map(block_shape):
    np.testing.assert_array_equal(show_program_ids((4, 4), block_shape, (2, 3), None),
                                  np.full((4, 4), 12))


def test_a_squeezed_block_dimension():
    def kernel(o_ref):
        assert o_ref.shape == (2,)
        o_ref[...] = jnp.full((2,), 10 * pl.program_id(1) + pl.program_id(0))
    out = pl.pallas_call(kernel,
                         jax.ShapeDtypeStruct((3, 4), dtype=np.int32),
                         out_specs=pl.BlockSpec((None, 2), lambda i, j: (i, j)),
                         grid=(3, 2), interpret=True)()
    np.testing.assert_array_equal(out, [[0, 0, 10, 10], [1, 1, 11, 11], [2, 2, 12, 12]])


def test_without_interpret_the_tpu_tiling_rule_holds():
    with pytest.raises(jax.TpurtError, match="tiles the last two dimensions by \\(8, 128\\)"):
        show_program_ids((8, 6), (2, 3), (4, 2), interpret=False)
