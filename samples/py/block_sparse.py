#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# A block-sparse matmul driven by scalar prefetch (PrefetchScalarGridSpec
# with num_scalar_prefetch=2), as samples/block_sparse.c runs it: output
# block row i takes x's block row rows[i], and k block k contributes only
# where mask[i, k] is set. Both arrays are in SMEM before the first step;
# the index map and the pl.when predicate read them.
# Run: TPURT_DEVICE=sim /usr/bin/python3 samples/py/block_sparse.py
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tpuemu as jax  # noqa: E402
import tpuemu.numpy as jnp  # noqa: E402
from tpuemu import pallas as pl  # noqa: E402
from tpuemu.pallas import tpu as pltpu  # noqa: E402

B = 128


def block_sparse_kernel(rows_ref, mask_ref, x_ref, y_ref, z_ref):
    i, k = pl.program_id(0), pl.program_id(2)

    @pl.when(k == 0)
    def _():
        z_ref[...] = jnp.zeros_like(z_ref)

    @pl.when(mask_ref[i * pl.num_programs(2) + k] != 0)
    def _():
        z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def block_sparse_matmul(rows, mask, x, y):
    gi, gk = mask.shape
    n = y.shape[1]
    return pl.pallas_call(
        block_sparse_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(gi, n // B, gk),
            in_specs=[pl.BlockSpec((B, B), lambda i, j, k, rows, mask: (rows[i], k)),
                      pl.BlockSpec((B, B), lambda i, j, k, rows, mask: (k, j))],
            out_specs=pl.BlockSpec((B, B), lambda i, j, k, rows, mask: (i, j))),
        out_shape=jax.ShapeDtypeStruct((gi * B, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(rows, mask.reshape(-1), x, y)


def main():
    rows = np.array([5, 0, 3, 3], dtype=np.int32)
    mask = np.array([[1, 0, 1, 0],
                     [0, 0, 0, 0],
                     [1, 1, 1, 1],
                     [0, 1, 0, 0]], dtype=np.int32)
    gi, gk = mask.shape
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6 * B, gk * B), dtype=np.float32)
    y = rng.standard_normal((gk * B, 2 * B), dtype=np.float32)
    z = block_sparse_matmul(rows, mask, x, y)
    st = jax.last_stats()
    ref = np.zeros_like(z)
    for i in range(gi):
        xr = x[rows[i] * B:(rows[i] + 1) * B]
        for k in range(gk):
            if mask[i, k]:
                ref[i * B:(i + 1) * B] += xr[:, k * B:(k + 1) * B] @ y[k * B:(k + 1) * B]
    err = np.abs(z - ref).max()
    ok = err < 1e-3
    print("block_sparse: %d x %d output blocks, %d k blocks, rows and mask in SMEM: "
          "%d steps, %d blocks fetched, %d fetches skipped; max error %.3g"
          % (gi, y.shape[1] // B, gk, st["steps"], st["blocks_fetched"], st["blocks_skipped"], err))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
