# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, ninth round (a):
jax/experimental/pallas/ops/tpu/flash_attention.py, its forward kernel
(the multi-step online softmax and the single-step one, causal or not,
segment ids, an attention bias, the logits soft cap, block_b > 1, the l
and m residuals) and its two backward kernels (dkv and dq) called as its
VJP calls them, transcribed as a user would write them against tpuemu
(only the imports changed, no jax.custom_vjp). JAX ships no public test
of this kernel; the tests here follow the shapes its users run, small,
and compare with a NumPy reference in float64 (mha_reference's math)."""
import dataclasses
import functools
from typing import NamedTuple

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


# --- the kernel, as flash_attention.py writes it ---

DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.dtype("float32")).max)
NUM_LANES = 128
NUM_SUBLANES = 8
MIN_BLOCK_SIZE = 128
TRANS_B_DIM_NUMBERS = (((1,), (1,)), ((), ()))


class SegmentIds(NamedTuple):
    q: object	# [batch_size, q_seq_len]
    kv: object	# [batch_size, kv_seq_len]


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    block_q: int
    block_k_major: int
    block_k: int
    block_b: int


def below_or_on_diag(r, r_blk_size, c, c_blk_size):
    # a block is below or on the diagonal as long as its bottom left corner is
    return ((r + 1) * r_blk_size - 1) > (c * c_blk_size)


def _flash_attention_kernel(q_tile_ref, *args, **kwargs):
    block_b = q_tile_ref.shape[0]
    if kwargs["block_k"] == kwargs["kv_seq_len"]:
        kernel = _flash_attention_kernel_single_batch_single_step
    else:
        kernel = _flash_attention_kernel_single_batch
    for batch_idx in range(block_b):
        kernel((batch_idx, 0), q_tile_ref, *args, **kwargs)


def _flash_attention_kernel_single_batch(
        batch_idx, q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref,
        q_segment_ids_tile_ref, kv_segment_ids_tile_ref, o_tile_ref, l_ref, m_ref,
        m_scratch_ref, l_scratch_ref, acc_scratch_ref, *, causal, sm_scale,
        attn_logits_soft_cap, block_k, kv_seq_len, mask_value):
    block_k_major = k_tile_ref.shape[2]
    block_q = q_tile_ref.shape[2]
    head_dim = q_tile_ref.shape[-1]

    kv_seq_idx = pl.program_id(3)

    @pl.when(kv_seq_idx == 0)
    def start_new_sequence():
        m_scratch_ref[batch_idx] = jnp.full(m_scratch_ref.shape[2:], -jnp.inf, jnp.float32)
        l_scratch_ref[batch_idx] = jnp.zeros(l_scratch_ref.shape[2:], jnp.float32)
        acc_scratch_ref[batch_idx] = jnp.zeros(acc_scratch_ref.shape[2:], jnp.float32)

    q_seq_idx = pl.program_id(2)
    if causal:
        should_run = below_or_on_diag(q_seq_idx, block_q, kv_seq_idx, block_k_major)
    else:
        should_run = True

    @pl.when(should_run)
    def run():
        @pl.loop(0, block_k_major, step=block_k, unroll=True)
        def _body(start_k):
            m_prev = m_scratch_ref[batch_idx]
            l_prev = l_scratch_ref[batch_idx]
            q = q_tile_ref[batch_idx]	# [block_q, head_dim]
            k = k_tile_ref[(*batch_idx, pl.dslice(start_k, block_k), slice(None))]

            s = jax.lax.dot_general(q, k, TRANS_B_DIM_NUMBERS,
                                    preferred_element_type=jnp.float32)

            if ab_tile_ref is not None:
                ab = ab_tile_ref[(*batch_idx, pl.dslice(None),
                                  pl.dslice(start_k, block_k))].astype(jnp.float32)
                s += ab

            if attn_logits_soft_cap is not None:
                capped_s = jnp.tanh(s / attn_logits_soft_cap)
                s = capped_s * attn_logits_soft_cap

            if sm_scale != 1.0:
                s *= sm_scale

            mask = None
            if q_segment_ids_tile_ref is not None:
                repeats, rem = divmod(block_k, NUM_LANES)
                if rem:
                    raise NotImplementedError(
                        f"kv block size must be a multiple of {NUM_LANES}")
                q_segment_ids = jnp.tile(q_segment_ids_tile_ref[batch_idx[0]], (1, repeats))
                kv_segment_ids = kv_segment_ids_tile_ref[
                    batch_idx[0], :1, pl.dslice(start_k, block_k)]	# [1, block_k]
                mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

            if causal:
                mask_shape = (block_q, block_k)
                row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
                row_ids += q_seq_idx * block_q
                col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
                col_ids += kv_seq_idx * block_k_major + start_k
                causal_mask = col_ids <= row_ids
                mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)

            s = s if mask is None else s + jnp.where(mask, 0.0, mask_value)

            m_curr = jnp.max(s, axis=1)[:, None]	# row max, [block_q, 1]
            m_next = jnp.maximum(m_prev, m_curr)	# [block_q, 128]

            block_k_repeats, rem = divmod(block_k, MIN_BLOCK_SIZE)
            if rem:
                raise NotImplementedError(
                    f"{block_k=} should be a multiple of {MIN_BLOCK_SIZE}")
            p = jnp.exp(s - jnp.tile(m_next, (1, block_k_repeats)))

            alpha = jnp.exp(m_prev - m_next)
            l_corr = alpha * l_prev
            l_next = jnp.sum(p, axis=1)[:, None] + l_corr

            head_dim_repeats, rem = divmod(head_dim, MIN_BLOCK_SIZE)

            def l_broadcast(l):
                return jnp.tile(l, (1, head_dim_repeats))
            if rem:
                if head_dim_repeats == 0:
                    def l_broadcast(l):
                        return l[:, :head_dim]
                else:
                    raise NotImplementedError(
                        f"{head_dim=} should be a multiple of {MIN_BLOCK_SIZE} if larger")
            l_scratch_ref[batch_idx] = l_next
            m_scratch_ref[batch_idx] = m_next

            l_next_inv_safe = jnp.where(l_next == 0.0, 1.0, 1.0 / l_next)
            acc_scratch_ref[batch_idx] *= l_broadcast(l_corr * l_next_inv_safe)
            v = v_tile_ref[(*batch_idx, pl.dslice(start_k, block_k), slice(None))]
            o_curr = jax.lax.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
            acc_scratch_ref[batch_idx] += o_curr * l_broadcast(l_next_inv_safe)

    @pl.when(kv_seq_idx == (kv_seq_len // block_k_major) - 1)
    def store_output():
        o_tile_ref[batch_idx] = acc_scratch_ref[batch_idx].astype(o_tile_ref.dtype)
        if l_ref is not None:
            l_ref[batch_idx] = l_scratch_ref[batch_idx].astype(l_ref.dtype)
        if m_ref is not None:
            m_ref[batch_idx] = m_scratch_ref[batch_idx].astype(m_ref.dtype)


def _flash_attention_kernel_single_batch_single_step(
        batch_idx, q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref,
        q_segment_ids_tile_ref, kv_segment_ids_tile_ref, o_tile_ref, l_ref=None,
        m_ref=None, *, causal, sm_scale, attn_logits_soft_cap, block_k, kv_seq_len,
        mask_value):
    block_k_major = k_tile_ref.shape[2]
    block_q = q_tile_ref.shape[2]

    assert kv_seq_len == block_k_major == block_k

    q = q_tile_ref[batch_idx]	# [block_q, head_dim]
    k = k_tile_ref[batch_idx]	# [block_k, head_dim]
    s = jax.lax.dot_general(q, k, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)

    if ab_tile_ref is not None:
        s += ab_tile_ref[batch_idx].astype(jnp.float32)

    if attn_logits_soft_cap is not None:
        capped_s = jnp.tanh(s / attn_logits_soft_cap)
        s = capped_s * attn_logits_soft_cap

    if sm_scale != 1.0:
        s *= sm_scale

    mask = None
    if q_segment_ids_tile_ref is not None:
        repeats, rem = divmod(block_k, NUM_LANES)
        if rem:
            raise NotImplementedError(f"kv block size must be a multiple of {NUM_LANES}")
        q_segment_ids = q_segment_ids_tile_ref[batch_idx[0]]	# [block_q, NUM_LANES]
        q_segment_ids = jnp.tile(q_segment_ids, (1, repeats))	# [block_q, block_k]
        kv_segment_ids = kv_segment_ids_tile_ref[batch_idx[0], :1]	# [1, block_k]
        mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

    if causal:
        q_seq_idx = pl.program_id(2)
        mask_shape = (block_q, block_k)
        row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
        row_ids += q_seq_idx * block_q
        col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
        causal_mask = col_ids <= row_ids
        mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)
    s = s if mask is None else s + jnp.where(mask, 0.0, mask_value)

    m = jnp.max(s, axis=1)[:, None]
    p = jnp.exp(s - m)
    l = jnp.sum(p, axis=1)[:, None]
    p /= l

    if m_ref is not None:
        m_ref[batch_idx] = lax.broadcast_in_dim(m, m_ref.shape[2:], range(2))
    if l_ref is not None:
        l_ref[batch_idx] = lax.broadcast_in_dim(l, l_ref.shape[2:], range(2))

    v = v_tile_ref[batch_idx]
    o_tile_ref[batch_idx] = jax.lax.dot(
        p.astype(v.dtype), v, preferred_element_type=jnp.float32).astype(o_tile_ref.dtype)


def _verify_block(block_name, dim_name, block, dim, should_divide=True):
    if block > dim:
        raise ValueError(f"{block_name}={block} should be smaller or equal to "
                         f"{dim_name}={dim}")
    if should_divide and dim % block != 0:
        raise ValueError(f"{dim_name}={dim} should be divisible by {block_name}={block}")


def _flash_attention_impl(q, k, v, ab, segment_ids, save_residuals, causal, sm_scale,
                          attn_logits_soft_cap, block_b, block_q, block_k_major, block_k,
                          debug):
    batch_size, num_heads, q_seq_len, head_dim = q.shape
    _, _, kv_seq_len, _ = k.shape
    _verify_block("block_q", "q_seq_len", block_q, q_seq_len, should_divide=False)
    _verify_block("block_k_major", "kv_seq_len", block_k_major, kv_seq_len)
    _verify_block("block_k", "kv_seq_len", block_k, kv_seq_len)
    _verify_block("block_b", "batch", block_b, batch_size, should_divide=False)

    grid = (pl.cdiv(batch_size, block_b), num_heads, pl.cdiv(q_seq_len, block_q),
            kv_seq_len // block_k_major)

    def q_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    def kv_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        if causal:
            # a skipped kv block prefetches the next valid one, the 0th
            next_kv_index = lax.select(
                below_or_on_diag(q_seq_index, block_q, kv_seq_index, block_k_major),
                kv_seq_index, 0)
        else:
            next_kv_index = kv_seq_index
        return (batch_index, head_index, next_kv_index, 0)

    def ab_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        if causal:
            should_run = below_or_on_diag(q_seq_index, block_q, kv_seq_index, block_k_major)
            next_q_index = lax.select(
                should_run, q_seq_index,
                lax.select(q_seq_index == (q_seq_len // block_q) - 1, 0, q_seq_index + 1))
            next_kv_index = lax.select(should_run, kv_seq_index, 0)
        else:
            next_q_index = q_seq_index
            next_kv_index = kv_seq_index
        return (batch_index, head_index, next_q_index, next_kv_index)

    def o_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    def lm_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    kernel = functools.partial(
        _flash_attention_kernel, causal=causal, mask_value=DEFAULT_MASK_VALUE,
        sm_scale=sm_scale, attn_logits_soft_cap=attn_logits_soft_cap, block_k=block_k,
        kv_seq_len=kv_seq_len)
    out_shape = [jax.ShapeDtypeStruct(shape=q.shape, dtype=q.dtype)]
    out_specs = [pl.BlockSpec((block_b, 1, block_q, head_dim), o_index_map)]

    if block_k != kv_seq_len:
        m_scratch = pltpu.VMEM((block_b, 1, block_q, MIN_BLOCK_SIZE), jnp.float32)
        l_scratch = pltpu.VMEM((block_b, 1, block_q, MIN_BLOCK_SIZE), jnp.float32)
        acc_scratch = pltpu.VMEM((block_b, 1, block_q, head_dim), jnp.float32)
        scratch_shapes = [m_scratch, l_scratch, acc_scratch]
    else:
        scratch_shapes = []

    if save_residuals:
        out_specs = [
            *out_specs,
            pl.BlockSpec((block_b, 1, block_q, MIN_BLOCK_SIZE), lm_index_map),
            pl.BlockSpec((block_b, 1, block_q, MIN_BLOCK_SIZE), lm_index_map),
        ]
        l = jax.ShapeDtypeStruct((batch_size, num_heads, q_seq_len, MIN_BLOCK_SIZE),
                                 dtype=jnp.float32)
        m = jax.ShapeDtypeStruct((batch_size, num_heads, q_seq_len, MIN_BLOCK_SIZE),
                                 dtype=jnp.float32)
        out_shape = (*out_shape, l, m)
    else:
        out_specs = [*out_specs, None, None]
        out_shape = (*out_shape, None, None)

    ab_block_spec = (pl.BlockSpec((block_b, 1, block_q, block_k_major), ab_index_map)
                     if ab is not None else None)

    q_segment_ids_spec = kv_segment_ids_spec = None
    q_segment_ids = kv_segment_ids = None
    if segment_ids is not None:
        def q_segment_ids_index_map(batch_index, head_index, q_seq_index, _):
            del head_index
            return (batch_index, q_seq_index, 0)

        def kv_segment_ids_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
            del head_index
            if causal:
                next_kv_index = lax.select(
                    below_or_on_diag(q_seq_index, block_q, kv_seq_index, block_k_major),
                    kv_seq_index, 0)
            else:
                next_kv_index = kv_seq_index
            return (batch_index, 0, next_kv_index)

        q_segment_ids_spec = pl.BlockSpec((block_b, block_q, NUM_LANES),
                                          q_segment_ids_index_map)
        kv_segment_ids_spec = pl.BlockSpec((block_b, NUM_SUBLANES, block_k_major),
                                           kv_segment_ids_index_map)

        q_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.q, (batch_size, q_seq_len, NUM_LANES), (0, 1))
        kv_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.kv, (batch_size, NUM_SUBLANES, kv_seq_len), (0, 2))

    in_specs = [
        pl.BlockSpec((block_b, 1, block_q, head_dim), q_index_map),
        pl.BlockSpec((block_b, 1, block_k_major, head_dim), kv_index_map),
        pl.BlockSpec((block_b, 1, block_k_major, head_dim), kv_index_map),
        ab_block_spec,
        q_segment_ids_spec,
        kv_segment_ids_spec,
    ]

    o, *aux = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=grid, in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=scratch_shapes),
        out_shape=out_shape,
        debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v, ab, q_segment_ids, kv_segment_ids)
    if save_residuals:
        l, m = (v[..., 0] for v in aux[-2:])
        return (o, l, m)
    return o


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal=False, sm_scale=1.0,
                    attn_logits_soft_cap=None, block_sizes=None, debug=False,
                    save_residuals=False):
    if block_sizes is None:
        block_sizes = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    return _flash_attention_impl(
        q, k, v, ab, segment_ids, save_residuals, causal, sm_scale, attn_logits_soft_cap,
        block_sizes.block_b, block_sizes.block_q, block_sizes.block_k_major,
        block_sizes.block_k, debug)


# --- the reference: mha_reference_no_custom_vjp's math, in NumPy float64 ---

def mha_reference(q, k, v, ab=None, segment_ids=None, *, causal=False,
                  mask_value=DEFAULT_MASK_VALUE, sm_scale=1.0, attn_logits_soft_cap=None,
                  save_residuals=False):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    logits = np.einsum("bhqc,bhkc->bhqk", q, k)
    if ab is not None:
        logits = logits + np.asarray(ab, np.float64)
    if attn_logits_soft_cap is not None:
        logits = np.tanh(logits / attn_logits_soft_cap) * attn_logits_soft_cap
    if sm_scale != 1.0:
        logits = logits * sm_scale
    mask = None
    if segment_ids is not None:
        mask = (np.asarray(segment_ids.q)[:, :, None] ==
                np.asarray(segment_ids.kv)[:, None, :])[:, None, :, :]
    if causal:
        qlen, klen = q.shape[2], k.shape[2]
        causal_mask = np.tril(np.ones((qlen, klen), bool))[None, None]
        mask = causal_mask if mask is None else np.logical_and(mask, causal_mask)
    if mask is not None:
        logits = logits + np.where(mask, 0.0, mask_value)
    m = logits.max(axis=-1)
    unnormalized = np.exp(logits - m[..., None])
    l = unnormalized.sum(axis=-1)
    out = np.einsum("bhqk,bhkc->bhqc", unnormalized / l[..., None], v)
    if save_residuals:
        return out, l, m
    return out


def _qkv(batch, heads, q_len, kv_len, d, dtype=jnp.float32, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(k1, (batch, heads, q_len, d), dtype=dtype)
    k = jax.random.normal(k2, (batch, heads, kv_len, d), dtype=dtype)
    v = jax.random.normal(k3, (batch, heads, kv_len, d), dtype=dtype)
    return q, k, v


def _segment_ids(batch, seq, seed):
    """Runs of equal ids, as packed sequences have them: a few segments a row."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((batch, seq), np.int32)
    for b in range(batch):
        cuts = np.sort(rng.choice(np.arange(1, seq), size=3, replace=False))
        ids[b] = np.searchsorted(cuts, np.arange(seq), side="right")
    return ids


# --- the forward kernel ---

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd(causal, block_k):
    # block_k 128 of kv 256: two kv steps of the online softmax; 256: the
    # single-step kernel (block_k == kv_seq_len)
    q, k, v = _qkv(1, 2, 256, 256, 64)
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o = flash_attention(q, k, v, causal=causal, sm_scale=0.125, block_sizes=bs)
    assert o.shape == q.shape and o.dtype == jnp.float32
    ref = mha_reference(q, k, v, causal=causal, sm_scale=0.125)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_fwd_inner_kv_loop(causal):
    # block_k_major 256 loaded at once, the pl.loop walking it in 128s
    q, k, v = _qkv(1, 1, 128, 512, 128, seed=1)
    bs = BlockSizes(block_q=128, block_k_major=256, block_k=128, block_b=1)
    o = flash_attention(q, k, v, causal=causal, block_sizes=bs)
    ref = mha_reference(q, k, v, causal=causal)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd_segment_ids(block_k):
    q, k, v = _qkv(2, 1, 256, 256, 64, seed=2)
    seg = SegmentIds(q=_segment_ids(2, 256, 3), kv=_segment_ids(2, 256, 3))
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o = flash_attention(q, k, v, segment_ids=seg, causal=True, block_sizes=bs)
    ref = mha_reference(q, k, v, segment_ids=seg, causal=True)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd_bias_and_soft_cap(block_k):
    q, k, v = _qkv(1, 2, 256, 256, 64, seed=4)
    ab = jax.random.normal(jax.random.key(5), (1, 2, 256, 256), dtype=jnp.float32)
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o = flash_attention(q, k, v, ab, causal=True, sm_scale=0.5, attn_logits_soft_cap=5.0,
                        block_sizes=bs)
    ref = mha_reference(q, k, v, ab, causal=True, sm_scale=0.5, attn_logits_soft_cap=5.0)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


def test_flash_attention_fwd_block_b():
    # two batch elements a block: the kernel loops over them in Python
    q, k, v = _qkv(2, 1, 128, 256, 64, seed=6)
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=2)
    o = flash_attention(q, k, v, causal=False, block_sizes=bs)
    np.testing.assert_allclose(o, mha_reference(q, k, v), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd_residuals(block_k):
    q, k, v = _qkv(1, 1, 256, 256, 128, seed=7)
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o, l, m = flash_attention(q, k, v, causal=True, block_sizes=bs, save_residuals=True)
    ro, rl, rm = mha_reference(q, k, v, causal=True, save_residuals=True)
    assert l.shape == m.shape == (1, 1, 256)
    np.testing.assert_allclose(o, ro, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(m, rm, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(l, rl, rtol=1e-4)


@pytest.mark.parametrize("block_k_major", [128, 256])
def test_flash_attention_fwd_debug_mode(block_k_major):
    # debug=True (the device's poison and hazard checks): the kernel reads
    # nothing it did not write, and its parallel dimensions do not race
    q, k, v = _qkv(1, 2, 256, 256, 64, seed=13)
    bs = BlockSizes(block_q=128, block_k_major=block_k_major, block_k=128, block_b=1)
    o = flash_attention(q, k, v, causal=True, block_sizes=bs, debug=True)
    np.testing.assert_allclose(o, mha_reference(q, k, v, causal=True), atol=2e-5, rtol=1e-4)


def test_flash_attention_fwd_bf16():
    q, k, v = _qkv(1, 2, 256, 256, 128, dtype=jnp.bfloat16, seed=8)
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    o = flash_attention(q, k, v, causal=True, sm_scale=128 ** -0.5, block_sizes=bs)
    assert o.dtype == jnp.bfloat16
    ref = mha_reference(q, k, v, causal=True, sm_scale=128 ** -0.5)
    # p is rounded to bf16 before the PV product, the output to bf16 after
    np.testing.assert_allclose(np.asarray(o, np.float32), ref, atol=2e-2, rtol=2e-2)


# --- the backward kernels, as _flash_attention_bwd calls them ---

def _flash_attention_dkv_kernel(
        q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref, q_segment_ids_tile_ref,
        kv_segment_ids_tile_ref, l_tile_ref, m_tile_ref, do_tile_ref, di_tile_ref,
        dk_tile_ref, dv_tile_ref, dk_scratch_ref, dv_scratch_ref, *, sm_scale, causal,
        mask_value, q_seq_len, block_q, block_k):
    _, _, block_q_major, _ = q_tile_ref.shape
    _, _, block_k_major, _ = k_tile_ref.shape

    q_seq_index = pl.program_id(axis=3)
    kv_seq_index = pl.program_id(axis=2)

    @pl.when(q_seq_index == 0)
    def start_new_sequence():
        dk_scratch_ref[:, :] = jnp.zeros(dk_scratch_ref.shape, dk_scratch_ref.dtype)
        dv_scratch_ref[:, :] = jnp.zeros(dv_scratch_ref.shape, dv_scratch_ref.dtype)

    def q_body(j, _):
        start_q = j * block_q

        def k_body(i, _):
            start_k = i * block_k
            k = k_tile_ref[0, 0, pl.ds(start_k, block_k), :]
            v = v_tile_ref[0, 0, pl.ds(start_k, block_k), :]
            q = q_tile_ref[0, 0, pl.ds(start_q, block_q), :]	# [block_q, head_dim]
            l = l_tile_ref[0, 0, pl.ds(start_q, block_q), :]	# [block_q, 128]
            m = m_tile_ref[0, 0, pl.ds(start_q, block_q), :]	# [block_q, 128]
            do = do_tile_ref[0, 0, pl.ds(start_q, block_q), :]
            di = di_tile_ref[0, 0, pl.ds(start_q, block_q), :].astype(jnp.float32)

            capped_logits = lax.dot_general(q, k, TRANS_B_DIM_NUMBERS,
                                            preferred_element_type=jnp.float32)

            if ab_tile_ref is not None:
                ab = ab_tile_ref[0, 0, pl.dslice(j * block_q, block_q),
                                 pl.dslice(i * block_k, block_k)].astype(jnp.float32)
                capped_logits += ab

            if sm_scale != 1.0:
                capped_logits *= sm_scale

            mask = None
            if q_segment_ids_tile_ref is not None:
                repeats, rem = divmod(block_k, NUM_LANES)
                if rem:
                    raise NotImplementedError()
                q_segment_ids = q_segment_ids_tile_ref[0, pl.ds(start_q, block_q), :]
                q_segment_ids = jnp.tile(q_segment_ids, (1, repeats))
                kv_segment_ids = kv_segment_ids_tile_ref[:, 0, pl.ds(start_k, block_k)]
                mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

            if causal:
                mask_shape = (block_q, block_k)
                row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
                row_ids += q_seq_index * block_q_major + start_q
                col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
                col_ids += kv_seq_index * block_k_major + start_k
                causal_mask = col_ids <= row_ids
                mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)

            capped_logits = (capped_logits if mask is None
                             else capped_logits + jnp.where(mask, 0.0, mask_value))

            p = jnp.exp(capped_logits - jnp.tile(m, (1, block_k // MIN_BLOCK_SIZE)))
            p = p * jnp.tile(1 / l, (1, block_k // MIN_BLOCK_SIZE))
            dv = lax.dot(p.T.astype(do.dtype), do, preferred_element_type=jnp.float32)
            dv_scratch_ref[pl.ds(start_k, block_k), :] += dv.astype(dv_scratch_ref.dtype)

            dp = lax.dot_general(do, v, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)
            ds = (dp - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE))) * p

            if sm_scale != 1.0:
                ds = ds * sm_scale

            dk = lax.dot(ds.T.astype(do.dtype), q, preferred_element_type=jnp.float32)
            dk_scratch_ref[pl.ds(start_k, block_k), :] += dk.astype(dk_scratch_ref.dtype)
        lax.fori_loop(0, block_k_major // block_k, k_body, None, unroll=True)

    if causal:
        should_run = below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major)
    else:
        should_run = True

    @pl.when(should_run)
    def run():
        lax.fori_loop(0, block_q_major // block_q, q_body, None, unroll=True)

    @pl.when(q_seq_index == q_seq_len // block_q_major - 1)
    def end_of_q_sequence():
        dv_tile_ref[0, 0, :, :] = dv_scratch_ref[...].astype(dv_tile_ref.dtype)
        dk_tile_ref[0, 0, :, :] = dk_scratch_ref[...].astype(dk_tile_ref.dtype)


def _flash_attention_bwd_dkv(q, k, v, ab, segment_ids, l, m, do, di, *, block_q_major,
                             block_q, block_k_major, block_k, sm_scale, causal=False,
                             mask_value=DEFAULT_MASK_VALUE, debug=False):
    batch_size, num_heads, q_seq_len, head_dim = q.shape
    _, _, kv_seq_len, _ = k.shape
    _verify_block("block_q_major_dkv", "q_seq_len", block_q_major, q_seq_len)
    _verify_block("block_q_dkv", "q_seq_len", block_q, q_seq_len)
    _verify_block("block_k_major_dkv", "kv_seq_len", block_k_major, kv_seq_len)
    _verify_block("block_k_dkv", "kv_seq_len", block_k, kv_seq_len)

    # the scalars broadcast across lanes
    m = jnp.broadcast_to(m[..., None], (*m.shape, MIN_BLOCK_SIZE))
    l = jnp.broadcast_to(l[..., None], (*l.shape, MIN_BLOCK_SIZE))
    di = jnp.broadcast_to(di[..., None], (*di.shape, MIN_BLOCK_SIZE))

    # kv before q: q is the contracting dimension
    grid = (batch_size, num_heads, kv_seq_len // block_k_major, q_seq_len // block_q_major)

    def qo_index_map(batch_index, head_index, kv_seq_index, q_seq_index):
        if causal:
            next_q_index = lax.select(
                below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                q_seq_index, 0)
        else:
            next_q_index = q_seq_index
        return (batch_index, head_index, next_q_index, 0)

    qo_spec = pl.BlockSpec((1, 1, block_q_major, head_dim), qo_index_map)
    do_spec = qo_spec

    def kv_index_map(batch_index, head_index, kv_seq_index, _):
        return (batch_index, head_index, kv_seq_index, 0)

    kv_spec = pl.BlockSpec((1, 1, block_k_major, head_dim), kv_index_map)

    def lm_index_map(batch_index, head_index, _, q_seq_index):
        return (batch_index, head_index, q_seq_index, 0)

    lm_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), lm_index_map)
    di_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), qo_index_map)

    def ab_index_map(batch_index, head_index, kv_seq_index, q_seq_index):
        return (batch_index, head_index, q_seq_index, kv_seq_index)

    dab_spec = (pl.BlockSpec((1, 1, block_q_major, block_k_major), ab_index_map)
                if ab is not None else None)

    q_segment_ids_spec = kv_segment_ids_spec = None
    q_segment_ids = kv_segment_ids = None
    if segment_ids is not None:
        def q_segment_ids_index_map(batch_index, head_index, kv_seq_index, q_seq_index):
            del head_index
            if causal:
                next_q_index = lax.select(
                    below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                    q_seq_index, 0)
            else:
                next_q_index = q_seq_index
            return (batch_index, next_q_index, 0)

        def kv_segment_ids_index_map(batch_index, head_index, kv_seq_index, _):
            del head_index
            return (batch_index, 0, kv_seq_index)

        q_segment_ids_spec = pl.BlockSpec((1, block_q_major, NUM_LANES),
                                          q_segment_ids_index_map)
        kv_segment_ids_spec = pl.BlockSpec((1, NUM_SUBLANES, block_k_major),
                                           kv_segment_ids_index_map)
        q_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.q, (batch_size, q_seq_len, NUM_LANES), (0, 1))
        kv_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.kv, (batch_size, NUM_SUBLANES, kv_seq_len), (0, 2))

    in_specs = [qo_spec, kv_spec, kv_spec, dab_spec, q_segment_ids_spec, kv_segment_ids_spec,
                lm_spec, lm_spec, do_spec, di_spec]

    out_shapes = [
        jax.ShapeDtypeStruct((batch_size, num_heads, kv_seq_len, head_dim), k.dtype),
        jax.ShapeDtypeStruct((batch_size, num_heads, kv_seq_len, head_dim), v.dtype),
    ]

    def dkv_index_map(batch_index, head_index, kv_seq_index, _):
        return (batch_index, head_index, kv_seq_index, 0)

    dkv_spec = pl.BlockSpec((1, 1, block_k_major, head_dim), dkv_index_map)
    out_specs = [dkv_spec, dkv_spec]
    scratch_shapes = [pltpu.VMEM((block_k_major, head_dim), jnp.float32),
                      pltpu.VMEM((block_k_major, head_dim), jnp.float32)]

    kernel = functools.partial(_flash_attention_dkv_kernel, block_q=block_q, block_k=block_k,
                               sm_scale=sm_scale, causal=causal, mask_value=mask_value,
                               q_seq_len=q_seq_len)
    dk, dv = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=grid, in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=scratch_shapes),
        out_shape=out_shapes,
        debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v, ab, q_segment_ids, kv_segment_ids, l, m, do, di)
    assert dk.shape == k.shape
    assert dv.shape == v.shape
    return dk, dv


def _flash_attention_dq_kernel(
        q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref, q_segment_ids_tile_ref,
        kv_segment_ids_tile_ref, l_tile_ref, m_tile_ref, do_tile_ref, di_tile_ref,
        dq_tile_ref, ds_tile_ref, dq_scratch_ref, *, sm_scale, causal, mask_value,
        kv_seq_len, block_k):
    _, _, block_k_major, _ = k_tile_ref.shape
    _, _, block_q_major, _ = q_tile_ref.shape

    kv_seq_index = pl.program_id(axis=3)
    q_seq_index = pl.program_id(axis=2)

    @pl.when(kv_seq_index == 0)
    def start_new_sequence():
        dq_scratch_ref[:, :] = jnp.zeros(dq_scratch_ref.shape, dq_scratch_ref.dtype)

    def body(i, _):
        k_slice = pl.ds(i * block_k, block_k)
        q = q_tile_ref[0, 0, :, :]
        k = k_tile_ref[0, 0, k_slice, :]	# [block_k, head_dim]
        v = v_tile_ref[0, 0, k_slice, :]	# [block_k, head_dim]
        l = l_tile_ref[0, 0, :, :]	# [block_q_major, 128]
        m = m_tile_ref[0, 0, :, :]	# [block_q_major, 128]
        do = do_tile_ref[0, 0, :, :]	# [block_q_major, head_dim]
        di = di_tile_ref[0, 0, :].astype(jnp.float32)	# [block_q_major, 128]

        capped_logits = jax.lax.dot_general(q, k, TRANS_B_DIM_NUMBERS,
                                            preferred_element_type=jnp.float32)

        if ab_tile_ref is not None:
            ab = ab_tile_ref[0, 0, :, pl.dslice(i * block_k, block_k)].astype(jnp.float32)
            capped_logits += ab

        if sm_scale != 1.0:
            capped_logits *= sm_scale

        mask = None
        if q_segment_ids_tile_ref is not None:
            repeats, rem = divmod(block_k, NUM_LANES)
            if rem:
                raise NotImplementedError(f"kv block size must be a multiple of {NUM_LANES}")
            q_segment_ids = jnp.tile(q_segment_ids_tile_ref[0], (1, repeats))
            kv_segment_ids = kv_segment_ids_tile_ref[:, 0, k_slice]	# [1, block_k]
            mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

        if causal:
            mask_shape = (block_q_major, block_k)
            row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
            row_ids += q_seq_index * block_q_major
            col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
            col_ids += kv_seq_index * block_k_major + i * block_k
            causal_mask = col_ids <= row_ids
            mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)
        capped_logits = (capped_logits if mask is None
                         else capped_logits + jnp.where(mask, 0.0, mask_value))

        p = jnp.exp(capped_logits - jnp.tile(m, (1, block_k // MIN_BLOCK_SIZE)))
        p = p * jnp.tile(1 / l, (1, block_k // MIN_BLOCK_SIZE))

        dp = jax.lax.dot_general(do, v, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)
        ds = (dp - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE))) * p

        if sm_scale != 1.0:
            ds = ds * sm_scale

        if ds_tile_ref is not None:
            ds_tile_ref[0, 0, :, pl.dslice(i * block_k, block_k)] = ds.astype(ds_tile_ref.dtype)

        dq_scratch_ref[:, :] += lax.dot(ds.astype(k.dtype), k,
                                        preferred_element_type=jnp.float32
                                        ).astype(dq_scratch_ref.dtype)

    if causal:
        should_run = below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major)
        should_not_run = lax.select(should_run, False, True)
    else:
        should_run = True
        should_not_run = False

    @pl.when(should_run)
    def run():
        lax.fori_loop(0, block_k_major // block_k, body, None, unroll=True)

    @pl.when(should_not_run)
    def zero_out_ds():
        if ds_tile_ref is not None:
            ds_tile_ref[...] = jnp.zeros_like(ds_tile_ref)

    @pl.when(kv_seq_index == kv_seq_len // block_k_major - 1)
    def end_of_kv_sequence():
        dq_tile_ref[0, 0, :, :] = dq_scratch_ref[...].astype(dq_tile_ref.dtype)
        dq_scratch_ref[...] = jnp.zeros_like(dq_scratch_ref)


def _flash_attention_bwd_dq(q, k, v, ab, segment_ids, l, m, do, di, *, block_q_major,
                            block_k_major, block_k, sm_scale, causal, mask_value, debug):
    batch_size, num_heads, q_seq_len, head_dim = q.shape
    _, _, kv_seq_len, _ = k.shape
    _verify_block("block_q_dq", "q_seq_len", block_q_major, q_seq_len)
    _verify_block("block_k_major_dq", "kv_seq_len", block_k_major, kv_seq_len)
    _verify_block("block_k_dq", "block_k", block_k, kv_seq_len)

    m = jnp.broadcast_to(m[..., None], (*m.shape, MIN_BLOCK_SIZE))
    l = jnp.broadcast_to(l[..., None], (*l.shape, MIN_BLOCK_SIZE))
    di = jnp.broadcast_to(di[..., None], (*di.shape, block_k_major))

    grid = (batch_size, num_heads, q_seq_len // block_q_major, kv_seq_len // block_k_major)

    def qo_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    qo_spec = pl.BlockSpec((1, 1, block_q_major, head_dim), qo_index_map)
    do_spec = qo_spec

    def kv_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        if causal:
            next_kv_index = lax.select(
                below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                kv_seq_index, 0)
        else:
            next_kv_index = kv_seq_index
        return (batch_index, head_index, next_kv_index, 0)

    kv_spec = pl.BlockSpec((1, 1, block_k_major, head_dim), kv_index_map)

    def lm_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    lm_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), lm_index_map)
    di_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), qo_index_map)

    def ab_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        return (batch_index, head_index, q_seq_index, kv_seq_index)

    dab_spec = (pl.BlockSpec((1, 1, block_q_major, block_k_major), ab_index_map)
                if ab is not None else None)

    q_segment_ids_spec = kv_segment_ids_spec = None
    q_segment_ids = kv_segment_ids = None
    if segment_ids is not None:
        def q_segment_ids_index_map(batch_index, head_index, q_seq_index, _):
            del head_index
            return (batch_index, q_seq_index, 0)

        def kv_segment_ids_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
            del head_index
            if causal:
                next_kv_index = lax.select(
                    below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                    kv_seq_index, 0)
            else:
                next_kv_index = kv_seq_index
            return (batch_index, 0, next_kv_index)

        q_segment_ids_spec = pl.BlockSpec((1, block_q_major, NUM_LANES),
                                          q_segment_ids_index_map)
        kv_segment_ids_spec = pl.BlockSpec((1, NUM_SUBLANES, block_k_major),
                                           kv_segment_ids_index_map)
        q_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.q, (batch_size, q_seq_len, NUM_LANES), (0, 1))
        kv_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.kv, (batch_size, NUM_SUBLANES, kv_seq_len), (0, 2))

    in_specs = [qo_spec, kv_spec, kv_spec, dab_spec, q_segment_ids_spec, kv_segment_ids_spec,
                lm_spec, lm_spec, do_spec, di_spec]

    out_shapes = [jax.ShapeDtypeStruct(q.shape, q.dtype),
                  jax.ShapeDtypeStruct(ab.shape, ab.dtype) if ab is not None else None]
    dq_spec = pl.BlockSpec((1, 1, block_q_major, head_dim), qo_index_map)
    out_specs = [dq_spec, dab_spec]
    scratch_shapes = [pltpu.VMEM((block_q_major, head_dim), jnp.float32)]

    kernel = functools.partial(_flash_attention_dq_kernel, sm_scale=sm_scale, causal=causal,
                               mask_value=mask_value, block_k=block_k, kv_seq_len=kv_seq_len)
    dq, ds = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=grid, in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=scratch_shapes),
        out_shape=out_shapes,
        debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v, ab, q_segment_ids, kv_segment_ids, l, m, do, di)
    return dq, ds	# dab is ds


def flash_attention_bwd(q, k, v, ab, segment_ids, o, l, m, do, *, causal, sm_scale, block,
                        minor=None):
    """_flash_attention_bwd with the major backward blocks @block and the
    minor ones (the kernels' inner loops) @minor."""
    minor = minor or block
    di = jnp.sum(o.astype(jnp.float32) * do.astype(jnp.float32), axis=-1)
    dk, dv = _flash_attention_bwd_dkv(
        q, k, v, ab, segment_ids, l, m, do, di, block_q_major=block, block_k_major=block,
        block_k=minor, block_q=minor, sm_scale=sm_scale, causal=causal,
        mask_value=DEFAULT_MASK_VALUE)
    dq, ds = _flash_attention_bwd_dq(
        q, k, v, ab, segment_ids, l, m, do, di, block_q_major=block, block_k_major=block,
        block_k=minor, sm_scale=sm_scale, causal=causal, mask_value=DEFAULT_MASK_VALUE,
        debug=False)
    return dq, dk, dv, ds


def mha_reference_grads(q, k, v, ab, segment_ids, do, *, causal, sm_scale):
    """The gradients of mha_reference's output against @do, float64."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    s = np.einsum("bhqc,bhkc->bhqk", q, k)
    if ab is not None:
        s = s + np.asarray(ab, np.float64)
    s = s * sm_scale
    mask = None
    if segment_ids is not None:
        mask = (np.asarray(segment_ids.q)[:, :, None] ==
                np.asarray(segment_ids.kv)[:, None, :])[:, None]
    if causal:
        cm = np.tril(np.ones((q.shape[2], k.shape[2]), bool))[None, None]
        mask = cm if mask is None else mask & cm
    if mask is not None:
        s = s + np.where(mask, 0.0, DEFAULT_MASK_VALUE)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dv = np.einsum("bhqk,bhqc->bhkc", p, do)
    dp = np.einsum("bhqc,bhkc->bhqk", do, v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * sm_scale
    dq = np.einsum("bhqk,bhkc->bhqc", ds, k)
    dk = np.einsum("bhqk,bhqc->bhkc", ds, q)
    return dq, dk, dv, ds


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_ab,with_segments,minor", [(False, False, None), (True, False, None),
                                                         (False, True, None),
                                                         (False, False, 128)])
def test_flash_attention_bwd(causal, with_ab, with_segments, minor):
    # the forward's residuals (l, m) then the dkv and dq kernels, as the
    # custom VJP runs them, against the gradients of the math in NumPy
    q, k, v = _qkv(1, 2, 256, 256, 128, seed=9)
    do = jax.random.normal(jax.random.key(10), q.shape, dtype=jnp.float32)
    ab = jax.random.normal(jax.random.key(11), (1, 2, 256, 256), dtype=jnp.float32) \
        if with_ab else None
    seg = SegmentIds(q=_segment_ids(1, 256, 12), kv=_segment_ids(1, 256, 12)) \
        if with_segments else None
    sm_scale = 128 ** -0.5
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    o, l, m = flash_attention(q, k, v, ab, seg, causal=causal, sm_scale=sm_scale,
                              block_sizes=bs, save_residuals=True)
    # minor 128: 256-row major blocks walked by the kernels' inner loops
    dq, dk, dv, ds = flash_attention_bwd(q, k, v, ab, seg, o, l, m, do, causal=causal,
                                         sm_scale=sm_scale, block=256 if minor else 128,
                                         minor=minor)
    rdq, rdk, rdv, rds = mha_reference_grads(q, k, v, ab, seg, do, causal=causal,
                                             sm_scale=sm_scale)
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-3)
    if with_ab:
        np.testing.assert_allclose(ds, rds, atol=2e-5, rtol=1e-3)
    else:
        assert ds is None


# --- what porting the kernel found: each of these failed before ---

def _whole(kernel, out_shape, *args, **kw):
    return pl.pallas_call(kernel, out_shape=out_shape, **kw)(*args)


def test_value_index_newaxis_and_ellipsis():
    # jnp.max(s, axis=1)[:, None] (a TraceError before), x[...], x[None, :, 0]
    def kernel(x_ref, o_ref, p_ref):
        s = x_ref[...]
        m = jnp.max(s, axis=1)[:, None]
        o_ref[...] = s[...] - m
        p_ref[...] = jnp.sum(s, axis=0)[None, :] + s[None, :, 0][:, :8].sum()
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) % 17
    o, p = _whole(kernel, (jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           jax.ShapeDtypeStruct((1, 128), jnp.float32)), x)
    np.testing.assert_array_equal(o, x - x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(p, x.sum(axis=0, keepdims=True) + x[:, 0].sum())


def test_lax_select_in_index_map():
    # lax.select of grid indices in an index map (libtpurt refused the text
    # 'jnp.where' there): block j, or block 0 above the diagonal
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(32, 128)
    o = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((4 * 4 * 8, 128), jnp.float32), grid=(4, 4),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (lax.select(j <= i, j, 0), 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i * 4 + j, 0)))(x)
    for i in range(4):
        for j in range(4):
            src = j if j <= i else 0
            np.testing.assert_array_equal(o[(i * 4 + j) * 8:(i * 4 + j + 1) * 8],
                                          x[src * 8:(src + 1) * 8])


def test_large_python_float_constant():
    # -0.7 * finfo(float32).max, a float64 not exact in float32, rounded as
    # JAX's weak types are (libtpurt refused it as an inexact immediate)
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + jnp.where(x_ref[...] > 0, 0.0, DEFAULT_MASK_VALUE)
    x = np.array([[1.0, -1.0] * 64] * 8, np.float32)
    o = _whole(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x)
    np.testing.assert_array_equal(o, x + np.where(x > 0, 0.0, np.float32(DEFAULT_MASK_VALUE)))


def test_lax_dot_and_dslice_none():
    # lax.dot (missing before) and pl.dslice(None), the whole dimension
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jax.lax.dot(x_ref[pl.dslice(None), pl.dslice(0, 128)], y_ref[...],
                                 preferred_element_type=jnp.float32)
    x = np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    o = _whole(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x, y)
    np.testing.assert_allclose(o, x[:, :128].astype(np.float64) @ y, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(jax.lax.dot(x[:, :128], y), x[:, :128] @ y, rtol=1e-5)


def test_host_broadcast_in_dim():
    ids = np.array([[0, 0, 1, 2], [3, 3, 3, 4]], np.int32)
    q = jax.lax.broadcast_in_dim(ids, (2, 4, 128), (0, 1))
    kv = jax.lax.broadcast_in_dim(ids, (2, 8, 4), (0, 2))
    np.testing.assert_array_equal(q, np.broadcast_to(ids[:, :, None], (2, 4, 128)))
    np.testing.assert_array_equal(kv, np.broadcast_to(ids[:, None, :], (2, 8, 4)))


def test_many_live_temporaries():
    # twenty values of different shapes alive at once: more scratch slots
    # than the job's 16 before (now 32), more temporaries than 32 (now 64)
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        vals = [x * float(i + 1) for i in range(12)]
        cols = [jnp.sum(v, axis=1, keepdims=True) for v in vals]
        ints = [lax.broadcasted_iota(jnp.int32, (8, 128), 1) + i for i in range(6)]
        acc = jnp.zeros((8, 128), jnp.float32)
        for v, c in zip(vals, cols):
            o_ref[...] = acc
            acc = acc + v - c
        for i in ints:
            acc = acc + i.astype(jnp.float32)
        o_ref[...] = acc
    x = np.random.default_rng(2).standard_normal((8, 128)).astype(np.float32)
    o = _whole(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x)
    ref = sum(x * (i + 1) - (x * (i + 1)).sum(axis=1, keepdims=True) for i in range(12)) + \
        sum(np.arange(128)[None, :] + i for i in range(6))
    np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-3)


def test_dead_snapshots_are_dropped():
    # m_prev still held when m_ref is stored to is bound first, in case
    # Python uses it again; it never is, so its statement (a temporary and
    # a copy: two a trip in flash attention's loop) is dropped
    def kernel(x_ref, m_ref, o_ref):
        m_ref[...] = x_ref[...]
        m_prev = m_ref[...]
        m_next = jnp.maximum(m_prev, 2.0)
        o_ref[...] = m_next
        m_ref[...] = m_next * 2.0
        o_ref[...] += m_ref[...]
    f = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),) * 2)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) % 5
    m, o = f(x)
    np.testing.assert_array_equal(m, np.maximum(x, 2.0) * 2.0)
    np.testing.assert_array_equal(o, np.maximum(x, 2.0) * 3.0)
    assert not any(s.split(" = ")[-1] == "m_ref[...]" for s in f.statements), f.statements
