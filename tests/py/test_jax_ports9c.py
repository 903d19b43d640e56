# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, ninth round (c):
jax/experimental/pallas/ops/tpu/megablox (gmm.py's gmm and tgmm, with
common.py's dtype rules and ops.py's VJP written out), transcribed as a
user would write them against tpuemu, and JAX's tests/pallas/
tpu_gmm_test.py GroupedMatmulTest: test_gmm (forward and both gradients,
transposed rhs, every dtype combination) and test_gmm_sharded_groups
(group_offset and existing_out), with group sizes drawn as its
hypothesis strategy draws them (ends sampled with replacement, so groups
may be empty) from a fixed seed, at JAX's GROUPED_MATMUL_TESTS shapes
that run quickly. Also ops/tpu/matmul.py, the guide's example kernel, as
export_back_compat_pallas_test.py's test_mosaic_matmul builds its inputs.
The references are NumPy."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

partial = functools.partial


# --- common.py ---

def assert_is_supported_dtype(dtype):
    if dtype != jnp.bfloat16 and dtype != jnp.float32:
        raise ValueError(f"Expected bfloat16 or float32 array but got {dtype}.")


def select_input_dtype(lhs, rhs):
    """bf16 x bf16 on the MXU (TPU v4 and later); mixed inputs in f32."""
    if lhs.dtype == jnp.bfloat16 and rhs.dtype == jnp.bfloat16:
        return jnp.bfloat16
    return jnp.float32


# --- gmm.py ---

def _validate_args(*, lhs, rhs, group_sizes, expected_rhs_dims=3):
    if lhs.ndim != 2:
        raise ValueError(f"Expected 2-tensor for 'lhs' but got {lhs.ndim}-tensor.")
    assert_is_supported_dtype(lhs.dtype)
    if rhs.ndim != expected_rhs_dims:
        raise ValueError(f"Expected {expected_rhs_dims}-tensor for 'rhs' but got "
                         f"{rhs.ndim}-tensor.")
    assert_is_supported_dtype(rhs.dtype)
    if group_sizes.dtype != jnp.int32:
        raise ValueError(f"Expected 32-bit integer 'group_sizes' but got {group_sizes.dtype}.")
    return lhs, group_sizes, select_input_dtype(lhs, rhs)


def _calculate_num_tiles(x, tx):
    tiles, rem = divmod(x, tx)
    if rem:
        raise ValueError(f"{x} must be divisible by x-dimension tile size ({tx}).")
    return tiles


def _calculate_irregular_num_tiles(x, tx):
    tiles, rem = divmod(x, tx)
    if rem:
        tiles += 1
    return tiles, rem


def make_group_metadata(*, group_sizes, m, tm, start_group, num_nonzero_groups,
                        visit_empty_groups=True):
    """group_offsets, group_ids and m_tile_ids, and the number of tiles."""
    num_groups = group_sizes.shape[0]
    end_group = start_group + num_nonzero_groups - 1

    group_ends = jnp.cumsum(group_sizes)
    group_offsets = jnp.concatenate([jnp.zeros(1, dtype=jnp.int32), group_ends])

    # (1) the group ends rounded up to a multiple of tm
    rounded_group_ends = ((group_ends + tm - 1) // tm * tm).astype(jnp.int32)
    # (2) the group starts rounded down to one
    group_starts = jnp.concatenate([jnp.zeros(1, dtype=jnp.int32), group_ends[:-1]])
    rounded_group_starts = group_starts // tm * tm
    # (3) rows of each group, zero-sized groups zero
    rounded_group_sizes = rounded_group_ends - rounded_group_starts
    rounded_group_sizes = jnp.where(group_sizes == 0, 0, rounded_group_sizes)
    # (4) in tiles
    group_tiles = rounded_group_sizes // tm

    if visit_empty_groups:
        group_tiles = jnp.where(group_sizes == 0, 1, group_tiles)

    tiles_m = _calculate_num_tiles(m, tm)
    group_ids = jnp.repeat(jnp.arange(num_groups, dtype=jnp.int32), group_tiles,
                           total_repeat_length=tiles_m + num_groups - 1)

    # how many times each m tile is visited: once by its owner, once more
    # by each group starting inside it at a row other than its first
    partial_tile_mask = jnp.logical_or((group_offsets[:-1] % tm) == 0, group_sizes == 0)
    if visit_empty_groups:
        partial_tile_mask = jnp.where(group_sizes == 0, 0, partial_tile_mask)
    partial_tile_ids = jnp.where(partial_tile_mask, tiles_m, group_offsets[:-1] // tm)
    tile_visits = jnp.histogram(partial_tile_ids, bins=tiles_m, range=(0, tiles_m - 1))[0] + 1
    m_tile_ids = jnp.repeat(jnp.arange(tiles_m, dtype=jnp.int32),
                            tile_visits.astype(jnp.int32),
                            total_repeat_length=tiles_m + num_groups - 1)

    # sharding: our shard's tiles first
    first_tile_in_shard = (group_ids < start_group).sum()
    group_ids = jnp.roll(group_ids, shift=-first_tile_in_shard, axis=0)
    m_tile_ids = jnp.roll(m_tile_ids, shift=-first_tile_in_shard, axis=0)

    iota = jnp.arange(num_groups, dtype=jnp.int32)
    active_group_mask = jnp.logical_and(iota <= end_group, iota >= start_group)
    group_tiles = jnp.where(active_group_mask, group_tiles, 0)
    num_tiles = group_tiles.sum()
    return (group_offsets, group_ids, m_tile_ids), num_tiles


def _get_group_size(*, grid_id, group_metadata):
    group_offsets, group_ids = group_metadata[:2]
    group_id = group_ids[grid_id]
    group_start = group_offsets[group_id]
    group_end = group_offsets[group_id + 1]
    return group_end - group_start


def _get_store_mask(*, grid_id, group_metadata, tm, tn):
    """Rows of the current tile that belong to the current group."""
    group_offsets, group_ids, m_tile_ids = group_metadata[:3]
    group_id = group_ids[grid_id]
    group_start = group_offsets[group_id]
    group_end = group_offsets[group_id + 1]
    m_id = m_tile_ids[grid_id] * tm
    iota = jax.lax.broadcasted_iota(jnp.int32, (tm, tn), 0) + m_id
    return jnp.logical_and(iota >= group_start, iota < group_end)


def _zero_uninitialized_memory(out, *, start_group, num_nonzero_groups, group_metadata):
    group_offsets = group_metadata[0]
    group_start = group_offsets[start_group]
    group_end = group_offsets[start_group + num_nonzero_groups]
    valid_mask = jax.lax.broadcasted_iota(jnp.int32, (out.shape[0],), 0)
    valid_mask = (valid_mask >= group_start) & (valid_mask < group_end)
    return jnp.where(valid_mask[:, None], out, 0)


def gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32, tiling=(128, 128, 128),
        group_offset=None, existing_out=None, transpose_rhs=False, interpret=False):
    """lhs[sizes[i-1]:sizes[i], :] @ rhs[i] for each group i."""
    if existing_out is not None:
        expected_dtype = existing_out.dtype
        if expected_dtype != preferred_element_type:
            raise ValueError("Existing output dtype must match preferred_element_type.")
    if group_offset is None:
        group_offset = jnp.array([0], dtype=jnp.int32)
    else:
        if group_offset.shape:
            raise ValueError(f"group_offset must be a ()-shaped array. Got: "
                             f"{group_offset.shape}.")
        group_offset = group_offset[None]
    num_current_groups = rhs.shape[0]
    num_total_groups = group_sizes.shape[0]
    lhs, group_sizes, input_dtype = _validate_args(lhs=lhs, rhs=rhs, group_sizes=group_sizes)

    m, k, n = (lhs.shape[0], lhs.shape[1], rhs.shape[2])
    if transpose_rhs:
        n = rhs.shape[1]

    if callable(tiling):
        tiling = tiling(m, k, n)
    if tiling is None:
        raise ValueError(f"No tuned tiling found for (m, k, n) = ({m}, {k}, {n})")

    tm, tk, tn = tiling
    tiles_k, k_rem = _calculate_irregular_num_tiles(k, tk)
    tiles_n, n_rem = _calculate_irregular_num_tiles(n, tn)
    del n_rem

    group_metadata, num_active_tiles = make_group_metadata(
        group_sizes=group_sizes, m=m, tm=tm, start_group=group_offset[0],
        num_nonzero_groups=rhs.shape[0], visit_empty_groups=False)

    def kernel(group_metadata, group_offset, lhs, rhs, existing_out, out, acc_scratch):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del group_offsets, group_ids, group_offset

        grid_id = pl.program_id(1)
        k_i = pl.program_id(2)

        @pl.when(k_i == 0)
        def _zero_acc():
            acc_scratch[...] = jnp.zeros_like(acc_scratch)

            if existing_out is not None:
                prev_grid_id = jnp.where(grid_id > 0, grid_id - 1, 0)
                is_first_processed_group = grid_id == 0
                m_tile_changed = m_tile_ids[grid_id] != m_tile_ids[prev_grid_id]
                first_time_seeing_out = jnp.logical_or(is_first_processed_group,
                                                       m_tile_changed)

                @pl.when(first_time_seeing_out)
                def _init_out():
                    out[...] = existing_out[...]

        def mask_k_rem(x, *, dim):
            if k_rem == 0:
                return x
            orig_dtype = x.dtype
            iota = lax.broadcasted_iota(jnp.int32, x.shape, dim)
            x = x.astype(jnp.float32)
            return jnp.where(iota < k_rem, x, 0).astype(orig_dtype)

        def _store_accum():
            mask = _get_store_mask(grid_id=grid_id, group_metadata=group_metadata, tm=tm,
                                   tn=tn)
            to_store = acc_scratch[...]
            out[...] = jax.lax.select(mask[...], to_store,
                                      out[...].astype(jnp.float32)
                                      ).astype(preferred_element_type)

        def _accum(is_last_k_tile):
            if is_last_k_tile:
                mask_k_rem_lhs = partial(mask_k_rem, dim=1)
                mask_k_rem_rhs = partial(mask_k_rem, dim=int(transpose_rhs))
            else:
                def mask_k_rem_lhs(x):
                    return x

                def mask_k_rem_rhs(x):
                    return x

            if transpose_rhs:
                dot_general_dims = (((1,), (1,)), ((), ()))
            else:
                dot_general_dims = (((1,), (0,)), ((), ()))

            loaded_lhs = lhs[...]
            loaded_rhs = rhs[...]
            acc_scratch[...] += lax.dot_general(
                mask_k_rem_lhs(loaded_lhs).astype(input_dtype),
                mask_k_rem_rhs(loaded_rhs).astype(input_dtype),
                preferred_element_type=jnp.float32,
                dimension_numbers=dot_general_dims)

            if is_last_k_tile:
                _store_accum()

        lax.cond(k_i == tiles_k - 1, partial(_accum, True), partial(_accum, False))

    def lhs_transform_indices(n_i, grid_id, k_i, group_metadata, group_offset):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del n_i, group_offsets, group_ids, group_offset
        return m_tile_ids[grid_id], k_i

    def rhs_transform_indices(n_i, grid_id, k_i, group_metadata, group_offset):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del group_offsets, m_tile_ids
        if transpose_rhs:
            k_i, n_i = n_i, k_i
        # group_ids are in the unsharded domain
        return group_ids[grid_id] - group_offset[0], k_i, n_i

    def out_transform_indices(n_i, grid_id, k_i, group_metadata, group_offset):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del k_i, group_offsets, group_ids, group_offset
        return m_tile_ids[grid_id], n_i

    out_block_spec = pl.BlockSpec((tm, tn), out_transform_indices)
    if existing_out is None:
        in_out_block_spec = None
        input_output_aliases = {}
    else:
        in_out_block_spec = out_block_spec
        input_output_aliases = {6: 0}

    lhs_block_spec = pl.BlockSpec((tm, tk), lhs_transform_indices)
    if transpose_rhs:
        rhs_block_spec = pl.BlockSpec((None, tn, tk), rhs_transform_indices)
    else:
        rhs_block_spec = pl.BlockSpec((None, tk, tn), rhs_transform_indices)

    call_gmm = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), preferred_element_type),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            in_specs=[lhs_block_spec, rhs_block_spec, in_out_block_spec],
            out_specs=out_block_spec,
            grid=(tiles_n, num_active_tiles, tiles_k),
            scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)],
        ),
        input_output_aliases=input_output_aliases,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        interpret=interpret,
    )

    out = call_gmm(group_metadata, group_offset, lhs, rhs, existing_out)
    if existing_out is None and num_current_groups < num_total_groups:
        out = _zero_uninitialized_memory(out, start_group=group_offset[0],
                                         num_nonzero_groups=rhs.shape[0],
                                         group_metadata=group_metadata)
    return out


def tgmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32, tiling=(128, 128, 128),
         group_offset=None, num_actual_groups=None, existing_out=None, interpret=False):
    """lhs[:, sizes[i-1]:sizes[i]] @ rhs[sizes[i-1]:sizes[i], :] for each group i."""
    if group_offset is None:
        group_offset = jnp.array([0], dtype=jnp.int32)
    else:
        group_offset = group_offset[None]
    lhs, group_sizes, input_dtype = _validate_args(lhs=lhs, rhs=rhs, group_sizes=group_sizes,
                                                   expected_rhs_dims=2)

    k, m, n = (lhs.shape[0], lhs.shape[1], rhs.shape[1])
    num_groups = group_sizes.shape[0]
    num_actual_groups = num_actual_groups if num_actual_groups is not None else num_groups

    if callable(tiling):
        tiling = tiling(m, k, n)
    if tiling is None:
        raise ValueError(f"No tuned tiling found for (m, k, n) = ({m}, {k}, {n})")

    tm, tk, tn = tiling
    tiles_k, k_rem = _calculate_irregular_num_tiles(k, tk)
    del k_rem
    tiles_n, n_rem = _calculate_irregular_num_tiles(n, tn)
    del n_rem

    group_metadata, num_active_tiles = make_group_metadata(
        group_sizes=group_sizes, m=m, tm=tm, start_group=group_offset[0],
        num_nonzero_groups=num_actual_groups, visit_empty_groups=True)

    def kernel(group_metadata, group_offset, lhs, rhs, existing_out, out, acc_scratch):
        grid_id = pl.program_id(2)
        group_offsets, group_ids, m_tile_ids = group_metadata
        del group_offsets, group_offset, m_tile_ids

        group = group_ids[grid_id]
        prev_grid_id = jnp.where(grid_id > 0, grid_id - 1, 0)
        prev_group = group_ids[prev_grid_id]

        group_has_changed = jnp.logical_or(grid_id == 0, prev_group != group)

        @pl.when(group_has_changed)
        def _zero_acc():
            acc_scratch[...] = jnp.zeros_like(acc_scratch)

        # compute only for groups with rows
        dont_skip = _get_group_size(grid_id=grid_id, group_metadata=group_metadata) > 0

        @pl.when(dont_skip)
        def _do():
            rhs_mask = _get_store_mask(grid_id=grid_id, group_metadata=group_metadata, tm=tm,
                                       tn=tn)
            lhs_mask = _get_store_mask(grid_id=grid_id, group_metadata=group_metadata, tm=tm,
                                       tn=tk)

            loaded_lhs = lhs[...]
            loaded_rhs = rhs[...]
            loaded_lhs = lax.select(lhs_mask[...], loaded_lhs.astype(jnp.float32),
                                    jnp.zeros_like(lhs, jnp.float32)).swapaxes(0, 1)
            loaded_rhs = lax.select(rhs_mask[...], loaded_rhs.astype(jnp.float32),
                                    jnp.zeros_like(rhs, jnp.float32))

            acc_scratch[...] += lax.dot(loaded_lhs.astype(input_dtype),
                                        loaded_rhs.astype(input_dtype),
                                        preferred_element_type=jnp.float32)

        is_end_of_grid = grid_id == (pl.num_programs(2) - 1)
        next_grid_id = jnp.where(is_end_of_grid, grid_id, grid_id + 1)
        next_group = group_ids[next_grid_id]

        group_is_changing = jnp.logical_or(is_end_of_grid, group != next_group)

        @pl.when(group_is_changing)
        def _store_accum():
            to_store = acc_scratch[...]
            if existing_out is not None:
                to_store += existing_out[...].astype(jnp.float32)
            out[...] = to_store.astype(preferred_element_type)

    def lhs_transform_indices(n_i, k_i, grid_id, group_metadata, group_offset):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del n_i, group_offsets, group_ids, group_offset
        return m_tile_ids[grid_id], k_i

    def rhs_transform_indices(n_i, k_i, grid_id, group_metadata, group_offset):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del k_i, group_offsets, group_ids, group_offset
        return m_tile_ids[grid_id], n_i

    def out_transform_indices(n_i, k_i, grid_id, group_metadata, group_offset):
        group_offsets, group_ids, m_tile_ids = group_metadata
        del group_offsets, m_tile_ids
        return group_ids[grid_id] - group_offset[0], k_i, n_i

    out_block_spec = pl.BlockSpec((None, tk, tn), out_transform_indices)
    if existing_out is None:
        in_out_block_spec = None
        input_output_aliases = {}
    else:
        in_out_block_spec = out_block_spec
        input_output_aliases = {6: 0}

    lhs_block_spec = pl.BlockSpec((tm, tk), lhs_transform_indices)
    rhs_block_spec = pl.BlockSpec((tm, tn), rhs_transform_indices)

    lhs = lhs.swapaxes(0, 1)
    call_gmm = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((num_actual_groups, k, n), preferred_element_type),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            in_specs=[lhs_block_spec, rhs_block_spec, in_out_block_spec],
            out_specs=out_block_spec,
            grid=(tiles_n, tiles_k, num_active_tiles),
            scratch_shapes=[pltpu.VMEM((tk, tn), jnp.float32)],
        ),
        input_output_aliases=input_output_aliases,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        interpret=interpret,
    )
    return call_gmm(group_metadata, group_offset, lhs, rhs, existing_out)


def gmm_vjp(lhs, rhs, group_sizes, cotangent, preferred_element_type, transpose_rhs):
    """ops.py's _gmm_bwd: the gradients of gmm's lhs and rhs."""
    grad_lhs = gmm(cotangent, rhs, group_sizes, lhs[0].dtype, transpose_rhs=not transpose_rhs)
    grad_rhs = tgmm(lhs.swapaxes(0, 1), cotangent, group_sizes, rhs.dtype,
                    num_actual_groups=rhs.shape[0])
    return grad_lhs, grad_rhs.swapaxes(1, 2) if transpose_rhs else grad_rhs


# --- tpu_gmm_test.py ---

def random_dense(shape, key, dtype, limit=None):
    if limit is None:
        limit = 1 / np.prod(shape)
    x = jax.random.uniform(key, shape, dtype, minval=-limit, maxval=limit)
    return x.astype(jnp.bfloat16).astype(dtype)


def group_sizes_strategy(rng, m, num_groups):
    """The test's hypothesis strategy with a seeded generator: group ends
    sampled with replacement in [0, m] (so groups may be empty), the last
    at m."""
    ends_no_final = np.sort(rng.integers(0, m + 1, size=num_groups - 1)).astype(np.int32)
    ends = np.concatenate([ends_no_final, np.array([m], dtype=np.int32)])
    starts = np.concatenate([np.zeros(1, dtype=np.int32), ends_no_final])
    return jnp.array(ends - starts, dtype=jnp.int32)


def reference_gmm(lhs, rhs, group_sizes):
    """float64: lhs's rows of group i times rhs[i]."""
    lhs, rhs = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
    start, out = 0, []
    for i, size in enumerate(np.asarray(group_sizes)):
        out.append(lhs[start:start + size] @ rhs[i])
        start += size
    return np.concatenate(out, axis=0)


def reference_tgmm(lhs_t, rhs, group_sizes):
    """float64: for each group, lhs_t's columns times rhs's rows of it."""
    lhs_t, rhs = np.asarray(lhs_t, np.float64), np.asarray(rhs, np.float64)
    start, out = 0, []
    for size in np.asarray(group_sizes):
        out.append(lhs_t[:, start:start + size] @ rhs[start:start + size])
        start += size
    return np.stack(out)


def tolerances(lhs_dtype, rhs_dtype, out_dtype):
    if jnp.bfloat16 in (lhs_dtype, rhs_dtype, out_dtype):
        return 1e-3, 1e-2	# atol, rtol
    return 1e-3, 1e-5


def assert_allclose(out, expected, dtype, atol, rtol):
    assert out.dtype == dtype
    np.testing.assert_allclose(np.asarray(out, np.float32), expected, atol=atol, rtol=rtol)


def _round(x, dtype):
    """@x (float64) as the kernel's result dtype holds it."""
    x = np.asarray(x, np.float32)
    return np.asarray(jnp.asarray(x).astype(jnp.bfloat16), np.float32) \
        if dtype == jnp.bfloat16 else x


# JAX's GROUPED_MATMUL_TESTS without (512, 2048, 128), which only repeats
# (512, 128, 128) over more k tiles, at these seeds' group counts
GROUPED_MATMUL_TESTS = [
    (128, 128, 128),
    (256, 128, 128),
    (128, 256, 128),
    (128, 128, 256),
    (256, 128, 512),
    (512, 128, 128),
    (128, 8, 16),	# partial tiles
]
F32, BF16 = jnp.float32, jnp.bfloat16
# with_dtype_arguments: every (lhs, rhs, out) combination
DTYPES = [(a, b, c) for a in (F32, BF16) for b in (F32, BF16) for c in (F32, BF16)]


def _gmm_case(m, k, n, lhs_dtype, rhs_dtype, out_dtype, transpose_rhs, seed):
    rng = np.random.default_rng(seed)
    num_groups = int(rng.integers(1, 33))
    key = jax.random.key(seed)
    k1, k2 = jax.random.split(key, 2)
    lhs = random_dense((m, k), k1, lhs_dtype, limit=1)
    rhs = random_dense((num_groups, k, n), k2, rhs_dtype, limit=1)
    group_sizes = group_sizes_strategy(rng, m, num_groups)

    rhs_arg = rhs.swapaxes(1, 2) if transpose_rhs else rhs
    out = gmm(lhs, rhs_arg, group_sizes, preferred_element_type=out_dtype,
              transpose_rhs=transpose_rhs)
    atol, rtol = tolerances(lhs_dtype, rhs_dtype, out_dtype)
    assert_allclose(out, _round(reference_gmm(lhs, rhs, group_sizes), out_dtype), out_dtype,
                    atol, rtol)

    cotangent = random_dense((m, n), k1, out_dtype, limit=1)
    grad_lhs, grad_rhs = gmm_vjp(lhs, rhs_arg, group_sizes, cotangent, out_dtype,
                                 transpose_rhs)
    ref_lhs = reference_gmm(cotangent, np.asarray(rhs, np.float64).swapaxes(1, 2),
                            group_sizes)
    ref_rhs = reference_tgmm(np.asarray(lhs, np.float64).T, cotangent, group_sizes)
    if transpose_rhs:
        ref_rhs = ref_rhs.swapaxes(1, 2)
    assert_allclose(grad_lhs, _round(ref_lhs, lhs_dtype), lhs_dtype, atol, rtol)
    assert_allclose(grad_rhs, _round(ref_rhs, rhs_dtype), rhs_dtype, atol, rtol)
    return np.asarray(group_sizes)


@pytest.mark.parametrize("m,k,n", GROUPED_MATMUL_TESTS)
@pytest.mark.parametrize("transpose_rhs", [False, True])
def test_gmm(m, k, n, transpose_rhs):
    _gmm_case(m, k, n, F32, F32, F32, transpose_rhs, seed=m + k + n)


@pytest.mark.parametrize("dtypes", DTYPES[1:])
@pytest.mark.parametrize("transpose_rhs", [False, True])
def test_gmm_dtypes(dtypes, transpose_rhs):
    _gmm_case(256, 128, 128, *dtypes, transpose_rhs, seed=3)


@pytest.mark.parametrize("sizes", [[0, 128, 0, 128], [0, 0, 37, 0, 219], [128, 128, 0],
                                   [5, 0, 0, 251, 0], [256]])
def test_gmm_empty_groups(sizes):
    # empty groups first, between unaligned ones and last: gmm skips them
    # (their rows none), tgmm visits each for a zero output
    group_sizes = jnp.array(sizes, dtype=jnp.int32)
    m, k, n = 256, 128, 128
    k1, k2, k3 = jax.random.split(jax.random.key(len(sizes)), 3)
    lhs = random_dense((m, k), k1, F32, limit=1)
    rhs = random_dense((len(sizes), k, n), k2, F32, limit=1)
    out = gmm(lhs, rhs, group_sizes)
    np.testing.assert_allclose(out, reference_gmm(lhs, rhs, group_sizes), atol=1e-3, rtol=1e-5)
    cot = random_dense((m, n), k3, F32, limit=1)
    t = tgmm(lhs.swapaxes(0, 1), cot, group_sizes)
    ref = reference_tgmm(np.asarray(lhs, np.float64).T, cot, group_sizes)
    np.testing.assert_allclose(t, ref, atol=1e-3, rtol=1e-5)
    for g, s in enumerate(sizes):
        if s == 0:
            assert not np.asarray(t[g]).any()


@pytest.mark.parametrize("m,k,n", [(256, 128, 128), (128, 8, 16)])
@pytest.mark.parametrize("dtypes", [DTYPES[0], DTYPES[-1], DTYPES[2]])
def test_gmm_sharded_groups(m, k, n, dtypes):
    lhs_dtype, rhs_dtype, out_dtype = dtypes
    rng = np.random.default_rng(m + k)
    group_stride = int(rng.integers(1, 5))
    num_groups = group_stride * int(rng.integers(2, 8 // group_stride + 2))
    k1, k2 = jax.random.split(jax.random.key(7), 2)
    lhs = random_dense((m, k), k1, lhs_dtype, limit=1)
    rhs = random_dense((num_groups, k, n), k2, rhs_dtype, limit=1)
    group_sizes = group_sizes_strategy(rng, m, num_groups)

    # the first shard alone zeroes the rows of the other groups; each later
    # one writes its groups' rows into existing_out
    out = gmm(lhs, rhs[0:group_stride], group_sizes, out_dtype)
    for group_offset in range(group_stride, num_groups, group_stride):
        out = gmm(lhs, rhs[group_offset:group_offset + group_stride], group_sizes, out_dtype,
                  group_offset=jnp.array(group_offset, dtype=jnp.int32), existing_out=out)
    atol, rtol = tolerances(lhs_dtype, rhs_dtype, out_dtype)
    assert_allclose(out, _round(reference_gmm(lhs, rhs, group_sizes), out_dtype), out_dtype,
                    atol, rtol)

    # the gradients, shard by shard as the test's vjps give them
    cotangent = random_dense((m, n), k1, out_dtype, limit=1)
    grad_lhs = None
    grad_rhs = []
    for group_offset in range(0, num_groups, group_stride):
        off = jnp.array(group_offset, dtype=jnp.int32)
        shard = rhs[group_offset:group_offset + group_stride]
        gl = gmm(cotangent, shard, group_sizes, lhs_dtype, group_offset=off,
                 transpose_rhs=True)
        gr = tgmm(lhs.swapaxes(0, 1), cotangent, group_sizes, rhs_dtype, group_offset=off,
                  num_actual_groups=group_stride)
        grad_lhs = gl if grad_lhs is None else grad_lhs + gl
        grad_rhs.append(gr)
    grad_rhs = jnp.concatenate(grad_rhs, axis=0)
    ref_lhs = reference_gmm(cotangent, np.asarray(rhs, np.float64).swapaxes(1, 2), group_sizes)
    ref_rhs = reference_tgmm(np.asarray(lhs, np.float64).T, cotangent, group_sizes)
    assert_allclose(grad_lhs, _round(ref_lhs, lhs_dtype), lhs_dtype, atol, rtol)
    assert_allclose(grad_rhs, _round(ref_rhs, rhs_dtype), rhs_dtype, atol, rtol)


def test_repeat_total_repeat_length():
    # jnp.repeat's total_repeat_length (NumPy has none): cut, or padded
    # with the last element even when its own repeat count is 0
    a = jnp.arange(4, dtype=jnp.int32)
    np.testing.assert_array_equal(jnp.repeat(a, jnp.array([1, 2, 0, 5]), total_repeat_length=10),
                                  [0, 1, 1, 3, 3, 3, 3, 3, 3, 3])
    np.testing.assert_array_equal(jnp.repeat(a, jnp.array([1, 2, 0, 0]), total_repeat_length=5),
                                  [0, 1, 1, 3, 3])
    np.testing.assert_array_equal(jnp.repeat(a, 3, total_repeat_length=5), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(jnp.repeat(a, 2), np.repeat(np.arange(4), 2))


def test_host_broadcasted_iota():
    # lax.broadcasted_iota outside a kernel (gmm's _zero_uninitialized_memory)
    np.testing.assert_array_equal(lax.broadcasted_iota(jnp.int32, (3, 4), 1),
                                  np.broadcast_to(np.arange(4), (3, 4)))
    r = lax.broadcasted_iota(jnp.int32, (5,), 0)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, np.arange(5))


# --- jax/experimental/pallas/ops/tpu/matmul.py, the guide's example kernel ---

def matmul_kernel(x_tile_ref, y_tile_ref, o_tile_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] = acc_ref[...] + jnp.dot(x_tile_ref[...], y_tile_ref[...],
                                          preferred_element_type=acc_ref.dtype)
    o_tile_ref[...] = acc_ref[...].astype(o_tile_ref.dtype)


def matmul(x, y, *, block_shape, block_k=256, out_dtype=None, debug=False):
    if out_dtype is None:
        if x.dtype != y.dtype:
            raise TypeError(f"Cannot deduce output dtype for different input dtypes: "
                            f"{x.dtype}, {y.dtype}")
        out_dtype = x.dtype
    acc_dtype = jnp.float32
    if x.dtype in [jnp.int8, jnp.int4, jnp.uint8, jnp.uint4]:
        acc_dtype = jnp.int32

    l, r = block_shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec((l, block_k), lambda i, _, k: (i, k)),
                      pl.BlockSpec((block_k, r), lambda _, j, k: (k, j))],
            out_specs=pl.BlockSpec((l, r), lambda i, j, k: (i, j)),
            grid=(x.shape[0] // l, y.shape[1] // r, x.shape[1] // block_k),
            scratch_shapes=[pltpu.VMEM((l, r), acc_dtype)],
        ),
        compiler_params=pltpu.TPUCompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        debug=debug,
    )(x, y)


def test_mosaic_matmul():
    # export_back_compat_pallas_test.py's test_mosaic_matmul, smaller: its
    # inputs built the same way, checked against NumPy, not golden data
    x_shape = (512, 512)
    x = 1.0 + 1e-3 * jnp.arange(int(np.prod(x_shape)), dtype=jnp.float32).reshape(x_shape)
    y = x[:512, :256]
    res = matmul(x, y, block_shape=(256, 256))
    ref = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
    np.testing.assert_allclose(res[::16, ::16], ref[::16, ::16], rtol=2e-6)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.int8])
def test_matmul_dtypes(dtype):
    # int8 accumulates in int32 (x.dtype in [jnp.int8, jnp.int4, ...]: the
    # dtype names the device has not compare unequal), bf16 in float32
    rng = np.random.default_rng(4)
    if dtype == jnp.int8:
        x = rng.integers(-128, 128, (256, 512)).astype(np.int8)
        y = rng.integers(-128, 128, (512, 256)).astype(np.int8)
        out = matmul(x, y, block_shape=(128, 128), out_dtype=jnp.int32)
        np.testing.assert_array_equal(out, x.astype(np.int64) @ y.astype(np.int64))
    else:
        x = jnp.asarray(rng.standard_normal((256, 512)), dtype=jnp.bfloat16)
        y = jnp.asarray(rng.standard_normal((512, 256)), dtype=jnp.bfloat16)
        out = matmul(x, y, block_shape=(128, 128))
        assert out.dtype == jnp.bfloat16
        ref = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
        np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=1e-2, atol=1e-1)
