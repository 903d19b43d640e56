# SPDX-License-Identifier: MIT
# pltpu.emit_pipeline(should_accumulate_out=True), JAX's rule: an output
# block is not read in; the body's block is added to the block's value
# before the pipeline as it is written back. Unrolled pipelines (16 steps
# or fewer) and device loops alike, consecutive revisits kept in VMEM.
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

ANY = pl.BlockSpec(memory_space=pltpu.ANY)


def _sum_rows(grid, out_map, x, z0):
    """z0 plus, per output block, the sum of the x blocks its steps read
    (the body zeroes its buffer at the block's first step, as kernels do)."""
    nb = x.shape[0] // 8

    def body(x_ref, z_ref):
        @pl.when(pl.program_id(len(grid) - 1) == 0)
        def _():
            z_ref[...] = jnp.zeros_like(z_ref)
        z_ref[...] += x_ref[...]

    def kernel(x_hbm, _, z_hbm):
        pltpu.emit_pipeline(
            body, grid=grid,
            in_specs=[pl.BlockSpec((8, 128), lambda *ij: (ij[-1] % nb, 0))],
            out_specs=pl.BlockSpec((8, 128), out_map),
            should_accumulate_out=True)(x_hbm, z_hbm)

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(z0.shape, z0.dtype),
                          in_specs=[ANY, ANY], out_specs=ANY,
                          input_output_aliases={1: 0})(x, z0)


@pytest.mark.parametrize("grid", [(2, 4), (4, 8)], ids=["unrolled", "device_loop"])
def test_blocks_add_to_what_was_there(grid):
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128) % 97
    z0 = np.full((8 * grid[0], 128), 1000.0, np.float32)
    z = _sum_rows(grid, lambda i, k: (i, 0), x, z0)
    want = z0.copy()
    for i in range(grid[0]):
        for k in range(grid[1]):
            want[8 * i:8 * i + 8] += x[8 * (k % 4):8 * (k % 4) + 8]
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("grid", [(8,), (32,)], ids=["unrolled", "device_loop"])
def test_one_block_every_step(grid):
    # a constant index map: one block, first visited at step 0 only
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128) % 13
    z0 = np.full((8, 128), -5.0, np.float32)
    z = _sum_rows(grid, lambda k: (0, 0), x, z0)
    want = z0 + sum(x[8 * (k % 4):8 * (k % 4) + 8] for k in range(grid[0]))
    np.testing.assert_array_equal(z, want)
