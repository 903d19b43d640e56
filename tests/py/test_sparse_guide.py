# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""The scalar prefetch and block-sparse guide (docs/pallas/tpu/sparse.md) as
written there, at 1024^3 instead of 16384^3 and with NumPy building the
sparse operands: the block dynamic slice, the DSD (dense = sparse @ dense)
matmul with input_output_aliases zeroing the unvisited blocks, and the
dense @ dense matmul with a block-sparse output mask and prefetch maps.

One change to the guide's code: its DSD kernel reads idxs_i_ref[num_blocks],
one past the array, on the last step (the value is discarded by `is_end |`);
a TPU reads whatever SMEM holds there, the device fails the job with an
SMEM range error instead (test_dsd_read_past_the_array_is_refused), so the
port clamps the index to num_blocks - 1."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def dynamic_slice_kernel(indices, x_ref, o_ref):
    del indices
    o_ref[...] = x_ref[...]


@jax.jit(static_argnums=(2,))
def block_dynamic_slice(x, starts, sizes):
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(1, 1),
        in_specs=[pl.BlockSpec(sizes, lambda i, j, block_idx: (block_idx[0], block_idx[1]))],
        out_specs=pl.BlockSpec(sizes, lambda *_: (0, 0)),
    )
    kernel = pl.pallas_call(dynamic_slice_kernel, grid_spec=grid_spec,
                            out_shape=jax.ShapeDtypeStruct(shape=sizes, dtype=x.dtype))
    block_idx = np.array([starts[0] // sizes[0], starts[1] // sizes[1]], np.int32)
    return kernel(block_idx, x)


def test_block_dynamic_slice():
    x = np.arange(512 * 512, dtype=np.int32).reshape(512, 512)
    np.testing.assert_array_equal(block_dynamic_slice(x, (128, 256), (128, 128)),
                                  x[128:256, 256:384])


def generate_block_sparse_mat(rng, M, N, blk_M, blk_N, p=0.2):
    """The guide's helper in NumPy: a dense matrix, its non-zero blocks and
    their block indices (grouped by row, as np.nonzero orders them)."""
    block_mask = rng.random((M // blk_M, N // blk_N)) < p
    indices = np.nonzero(block_mask)
    block_data = rng.random((len(indices[0]), blk_M, blk_N)).astype(np.float32)
    dense = np.zeros((M, N), np.float32)
    for blk, (i, j) in enumerate(zip(*indices)):
        dense[i * blk_M:(i + 1) * blk_M, j * blk_N:(j + 1) * blk_N] = block_data[blk]
    return dense, block_data, indices[0].astype(np.int32), indices[1].astype(np.int32)


def dsd_call(past=0):
    M = N = K = 1024
    blk_M = blk_N = blk_K = 256
    rng = np.random.default_rng(0)
    X_dense, X_blocks, indices_i, indices_k = generate_block_sparse_mat(
        rng, M, K, blk_M, blk_K, p=0.3)
    num_blocks = X_blocks.shape[0]
    # past 1: the last step reads idxs_i_ref one past its end (the guide
    # clamps to the end); more: every step reads that far further on

    def dsd_kernel(idxs_i_ref, idxs_k_ref,  # Scalar prefetch inputs.
                   x_ref, y_ref, _, o_ref,  # Kernel inputs.
                   accum_scratch):
        del idxs_k_ref
        blk_idx = pl.program_id(1)
        is_start = blk_idx == 0
        changed_blocks = (idxs_i_ref[blk_idx] != idxs_i_ref[jnp.maximum(blk_idx - 1, 0)])

        @pl.when(is_start | changed_blocks)
        def _():
            accum_scratch[...] = jnp.zeros_like(accum_scratch)
        accum_scratch[...] += jnp.dot(x_ref[0, :, :], y_ref[...],
                                      preferred_element_type=jnp.float32)

        nxt = jnp.minimum(blk_idx + 1, num_blocks - 1 + min(past, 1)) + max(past - 1, 0)
        next_block_change = (idxs_i_ref[blk_idx] != idxs_i_ref[nxt])
        is_end = blk_idx == (num_blocks - 1)

        @pl.when(is_end | next_block_change)
        def _():
            o_ref[...] = accum_scratch[...].astype(o_ref.dtype)

    def x_map(j, blk_idx, blk_idxs_i, blk_idxs_k):
        return (blk_idx, 0, 0)

    def y_map(j, blk_idx, blk_idxs_i, blk_idxs_k):
        return (blk_idxs_k[blk_idx], j)

    def o_map(j, blk_idx, blk_idxs_i, blk_idxs_k):
        return (blk_idxs_i[blk_idx], j)

    Y = rng.random((K, N)).astype(np.float32)
    zeros = np.zeros((M, N), np.float32)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=(N // blk_N, num_blocks),
        in_specs=[pl.BlockSpec((1, blk_M, blk_K), x_map),
                  pl.BlockSpec((blk_K, blk_N), y_map),
                  # Placeholder for a zeros-array used by input_output_aliases.
                  pl.BlockSpec((blk_M, blk_N), o_map)],
        out_specs=pl.BlockSpec((blk_M, blk_N), o_map),
        scratch_shapes=[pltpu.VMEM((blk_M, blk_N), dtype=jnp.float32)])
    kernel = pl.pallas_call(dsd_kernel, grid_spec=grid_spec,
                            out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
                            input_output_aliases={4: 0})
    return kernel(indices_i, indices_k, X_blocks, Y, zeros), X_dense @ Y


def test_dsd_matmul():
    result, ref = dsd_call()
    np.testing.assert_allclose(result, ref, rtol=1e-5, atol=1e-3)
    assert (ref == 0).any() and (ref != 0).any()	# some blocks never visited


def test_dsd_read_one_past_the_array_reads_the_next():
    # idxs_i_ref[num_blocks] is idxs_k_ref[0] in SMEM, as on a TPU; the
    # last step stores whatever it compares to, so the answer stands
    result, ref = dsd_call(past=1)
    np.testing.assert_allclose(result, ref, rtol=1e-5, atol=1e-3)


def test_dsd_read_past_smem_is_refused():
    # past both prefetch arrays (the job's whole SMEM): refused
    with pytest.raises(jax.TpurtError, match=r"SMEM index \d+ outside scalar-prefetch "
                       r"'idxs_i_ref' \(\d+ elements, \d+ to the end of the job's SMEM\)"):
        result, ref = dsd_call(past=10 ** 4)


def sparsify_mask(mask, block_shape):
    """The guide's sparsify_mask in NumPy: the block mask, the prefetch maps
    (the next non-zero block's mask index, i and j) and the distinct
    non-zero mask blocks."""
    M, N = mask.shape
    bm, bn = block_shape
    block_mask = np.zeros((M // bm, N // bn), dtype=mask.dtype)
    prefetch_mask = np.zeros_like(block_mask)
    prefetch_i = np.zeros_like(block_mask)
    prefetch_j = np.zeros_like(block_mask)
    kinds, mask_data = [], []
    next_kind, next_i, next_j = 0, M // bm - 1, N // bn - 1
    for i in range(M // bm - 1, -1, -1):
        for j in range(N // bn - 1, -1, -1):
            block = mask[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn]
            if block.any():
                if block.tobytes() not in kinds:
                    kinds.append(block.tobytes())
                    mask_data.append(block)
                next_kind, next_i, next_j = kinds.index(block.tobytes()), i, j
            block_mask[i, j] = block.any()
            prefetch_mask[i, j] = next_kind
            prefetch_i[i, j] = next_i
            prefetch_j[i, j] = next_j
    return block_mask, prefetch_mask, prefetch_i, prefetch_j, np.stack(mask_data)


def sparse_mask_matmul(block_mask_ref, prefetch_mask, prefetch_i, prefetch_j,  # Scalar prefetch.
                       x_ref, y_ref, mask_ref, o_ref,  # Kernel inputs.
                       accum_scratch):
    del prefetch_mask, prefetch_i, prefetch_j
    i, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    should_compute = block_mask_ref[i, j] != 0

    @pl.when(k == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)
        accum_scratch[...] = jnp.zeros_like(accum_scratch[...])

    # We only compute the output for blocks with non-zero masks.
    @pl.when(should_compute)
    def _():
        result = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
        accum_scratch[...] += result

        @pl.when(k == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = (mask_ref[0, ...] * accum_scratch[...]).astype(o_ref.dtype)


def x_map(i, j, k, block_mask, prefetch_mask, prefetch_i, prefetch_j):
    del prefetch_mask, prefetch_j
    k_fetch = (block_mask[i, j] != 0) * k
    return (prefetch_i[i, j], k_fetch)


def y_map(i, j, k, block_mask, prefetch_mask, prefetch_i, prefetch_j):
    del prefetch_mask, prefetch_i
    k_fetch = (block_mask[i, j] != 0) * k
    return (k_fetch, prefetch_j[i, j])


def mask_map(i, j, k, block_mask, prefetch_mask, *_):
    del k, block_mask
    return (prefetch_mask[i, j], 0, 0)


def o_map(i, j, k, *_):
    del k
    return (i, j)


def test_sparse_mask_matmul():
    M = N = K = 1024
    blk_M = blk_N = 256
    blk_K = 512
    rng = np.random.default_rng(1)
    X = jax.to_bf16(rng.standard_normal((M, K)))
    Y = jax.to_bf16(rng.standard_normal((K, N)))
    mask = np.tril(np.ones((M, N), dtype=np.int32))
    block_mask, prefetch_mask, prefetch_i, prefetch_j, sparse_mask_data = sparsify_mask(
        mask, (blk_M, blk_N))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=4,
        grid=(M // blk_M, N // blk_N, K // blk_K),
        in_specs=[pl.BlockSpec((blk_M, blk_K), x_map),
                  pl.BlockSpec((blk_K, blk_N), y_map),
                  pl.BlockSpec((1, blk_M, blk_N), mask_map)],
        out_specs=pl.BlockSpec((blk_M, blk_N), o_map),
        scratch_shapes=[pltpu.VMEM((blk_M, blk_N), dtype=jnp.float32)])
    kernel = pl.pallas_call(sparse_mask_matmul, grid_spec=grid_spec,
                            out_shape=jax.ShapeDtypeStruct((M, N), jnp.bfloat16))
    result = jax.from_bf16(kernel(block_mask, prefetch_mask, prefetch_i, prefetch_j, X, Y,
                                  sparse_mask_data))
    ref = mask * (jax.from_bf16(X).astype(np.float64) @ jax.from_bf16(Y))
    # a bf16 output: within 2^-8 of the largest value
    np.testing.assert_allclose(result, ref, atol=np.abs(ref).max() / 256)
    assert (result[np.triu_indices(M, 1)] == 0).all()
